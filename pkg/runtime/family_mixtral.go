package runtime

import "github.com/kvqlabs/kvq/pkg/runtime/backend"

// mixtralFamily is Mixtral: the Llama block (a sliding window when
// config.json declares one, as Mistral) whose FFN is a mixture of SwiGLU
// experts: the router's top-k logits, a softmax over those k, and the
// chosen experts' outputs weighted. llama.cpp writes its GGUF files as
// architecture "llama" with llama.expert_count and the experts' stacked
// ffn_{gate,up,down}_exps tensors.
var mixtralFamily = Family{
	Archs: []Arch{
		{Name: "mixtral", HF: "MixtralForCausalLM", HFWindow: true, GGUF: "llama", Routing: backend.TopKSoftmax},
	},
	Tensors: withFFN(llamaFamily.Tensors, moeTensors("block_sparse_moe.gate.weight",
		"block_sparse_moe.experts.%d.w1.weight", "block_sparse_moe.experts.%d.w3.weight", "block_sparse_moe.experts.%d.w2.weight")),
	Layer: llamaLayer,
	Block: moeBlock,
}
