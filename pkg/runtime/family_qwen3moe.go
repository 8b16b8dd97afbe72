package runtime

import "github.com/kvqlabs/kvq/pkg/runtime/backend"

// qwen3moeFamily is Qwen3-MoE: the Qwen3 block (per-head q/k RMSNorms)
// whose FFN is, in its expert layers, a mixture of SwiGLU experts: a
// softmax over every expert's logit, the k largest probabilities,
// renormalised to sum to 1 with norm_topk_prob (llama.cpp always
// renormalises). Layers in mlp_only_layers, or whose index+1 is not a
// multiple of decoder_sparse_step, keep a dense MLP of intermediate_size;
// a GGUF file's dense layers are those without a router.
var qwen3moeFamily = Family{
	Archs: []Arch{
		{Name: "qwen3moe", HF: "Qwen3MoeForCausalLM", GGUFNeoX: true, Routing: backend.SoftmaxTopKNorm,
			HFRequired: []string{"self_attn.q_norm.weight", "self_attn.k_norm.weight"}},
	},
	Tensors: withFFN(llamaFamily.Tensors, moeTensors("mlp.gate.weight",
		"mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight", "mlp.experts.%d.down_proj.weight")),
	Layer: llamaLayer,
	Block: moeBlock,
}
