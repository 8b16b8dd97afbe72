package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The templates under testdata are the "chat_template" strings of the
// models' tokenizer_config.json files, verbatim:
//
//   - llama-3.1-instruct.jinja: meta-llama/Llama-3.1-8B-Instruct
//     (huggingface.co/meta-llama/Llama-3.1-8B-Instruct, tokenizer_config.json)
//   - qwen2.5-instruct.jinja: Qwen/Qwen2.5-7B-Instruct
//     (huggingface.co/Qwen/Qwen2.5-7B-Instruct, tokenizer_config.json; the
//     whole Qwen2.5-Instruct family shares it)
//   - mistral-7b-instruct-v0.2.jinja: mistralai/Mistral-7B-Instruct-v0.2
//     (huggingface.co/mistralai/Mistral-7B-Instruct-v0.2,
//     tokenizer_config.json, the "v1" template with an optional system
//     message; llama.cpp's tests/test-chat-template.cpp carries a copy)
//
// Every expected string below is written out by hand from the template's
// logic.

func loadTemplate(t *testing.T, name string) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := Compile(string(src))
	if err != nil {
		t.Fatalf("Compile(%s): %v", name, err)
	}
	return tmpl
}

// weatherTool is an OpenAI-style tool definition, as JSON so that its key
// order survives (transformers' tojson keeps insertion order).
var weatherTool = json.RawMessage(`[{"type": "function", "function": {"name": "get_weather",
	"description": "Get the weather in a city", "parameters": {"type": "object",
	"properties": {"city": {"type": "string"}}, "required": ["city"]}}}]`)

// weatherToolIndented is weatherTool[0] | tojson(indent=4).
const weatherToolIndented = `{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {
                    "type": "string"
                }
            },
            "required": [
                "city"
            ]
        }
    }
}`

// weatherToolCompact is weatherTool[0] | tojson.
const weatherToolCompact = `{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}`

type templateCase struct {
	name    string
	msgs    []Message
	opts    Options
	want    string
	wantErr string // raise_exception message, when the template must fail
}

func runTemplateCases(t *testing.T, file string, cases []templateCase) {
	tmpl := loadTemplate(t, file)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opts.Now == nil {
				tc.opts.Now = fixedNow
			}
			got, err := tmpl.Render(tc.msgs, tc.opts)
			if tc.wantErr != "" {
				var raise *RaiseError
				if !errors.As(err, &raise) || raise.Msg != tc.wantErr {
					t.Fatalf("Render = %q, %v; want raise_exception(%q)", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != tc.want {
				t.Errorf("Render =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestLlama31(t *testing.T) {
	const (
		bos    = "<|begin_of_text|>"
		header = bos + "<|start_header_id|>system<|end_header_id|>\n\n"
		dates  = "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
		prompt = "<|start_header_id|>assistant<|end_header_id|>\n\n"
	)
	opts := func(agp bool, extra map[string]any) Options {
		return Options{AddGenerationPrompt: agp, BOSToken: bos, EOSToken: "<|eot_id|>", Extra: extra}
	}
	sysUser := []Message{{Role: "system", Content: "You are a bot."}, {Role: "user", Content: "Weather in Paris?"}}
	runTemplateCases(t, "llama-3.1-instruct.jinja", []templateCase{
		{
			name: "system and user with generation prompt",
			msgs: []Message{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "What is the capital of France?"}},
			opts: opts(true, nil),
			want: header + dates + "You are a helpful assistant.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nWhat is the capital of France?<|eot_id|>" + prompt,
		},
		{
			name: "user only without generation prompt",
			msgs: []Message{{Role: "user", Content: "Hi"}},
			opts: opts(false, nil),
			want: header + dates + "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
		},
		{
			name: "multi-turn contents are trimmed",
			msgs: []Message{{Role: "system", Content: "  Be brief.\n"}, {Role: "user", Content: " Hello "}, {Role: "assistant", Content: "Hi there! \n"}, {Role: "user", Content: "Bye"}},
			opts: opts(true, nil),
			want: header + dates + "Be brief.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>" + prompt,
		},
		{
			name: "date_string overrides the default date",
			msgs: []Message{{Role: "user", Content: "Hi"}},
			opts: opts(false, map[string]any{"date_string": "07 Mar 2025"}),
			want: header + "Cutting Knowledge Date: December 2023\nToday Date: 07 Mar 2025\n\n" +
				"<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
		},
		{
			name: "tools go into the first user message",
			msgs: sysUser,
			opts: opts(true, map[string]any{"tools": weatherTool}),
			want: header + "Environment: ipython\n" + dates + "You are a bot.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\n" +
				"Given the following functions, please respond with a JSON for a function call " +
				"with its proper arguments that best answers the given prompt.\n\n" +
				`Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.` +
				"Do not use variables.\n\n" + weatherToolIndented + "\n\n" + "Weather in Paris?<|eot_id|>" + prompt,
		},
		{
			name: "tools in the system message",
			msgs: sysUser,
			opts: opts(false, map[string]any{"tools": weatherTool, "tools_in_user_message": false}),
			want: header + "Environment: ipython\n" + dates +
				"You have access to the following functions. To call a function, please respond with JSON for a function call." +
				`Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.` +
				"Do not use variables.\n\n" + weatherToolIndented + "\n\n" + "You are a bot.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nWeather in Paris?<|eot_id|>",
		},
		{
			name: "builtin tools",
			msgs: []Message{{Role: "user", Content: "Hi"}},
			opts: opts(false, map[string]any{"builtin_tools": []string{"brave_search", "code_interpreter", "wolfram_alpha"}}),
			want: header + "Environment: ipython\nTools: brave_search, wolfram_alpha\n\n" + dates +
				"<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
		},
		{
			name:    "tools without a user message",
			msgs:    []Message{{Role: "system", Content: "You are a bot."}},
			opts:    opts(true, map[string]any{"tools": weatherTool}),
			wantErr: "Cannot put tools in the first user message when there's no first user message!",
		},
	})
}

func TestQwen25(t *testing.T) {
	const defaultSystem = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
	toolsBlock := "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
		weatherToolCompact + "\n</tools>\n\n" +
		"For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
	opts := func(agp bool, extra map[string]any) Options {
		return Options{AddGenerationPrompt: agp, EOSToken: "<|im_end|>", Extra: extra}
	}
	runTemplateCases(t, "qwen2.5-instruct.jinja", []templateCase{
		{
			name: "user only gets the default system prompt",
			msgs: []Message{{Role: "user", Content: "Hi"}},
			opts: opts(true, nil),
			want: defaultSystem + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
		},
		{
			name: "system and multi-turn without generation prompt",
			msgs: []Message{{Role: "system", Content: "You are a bot."}, {Role: "user", Content: "Hello"}, {Role: "assistant", Content: "Hi there!"}, {Role: "user", Content: "Bye"}},
			opts: opts(false, nil),
			want: "<|im_start|>system\nYou are a bot.<|im_end|>\n" +
				"<|im_start|>user\nHello<|im_end|>\n" +
				"<|im_start|>assistant\nHi there!<|im_end|>\n" +
				"<|im_start|>user\nBye<|im_end|>\n",
		},
		{
			name: "contents are not trimmed",
			msgs: []Message{{Role: "user", Content: " spaced \n"}},
			opts: opts(false, nil),
			want: defaultSystem + "<|im_start|>user\n spaced \n<|im_end|>\n",
		},
		{
			name: "a later system message stays in place",
			msgs: []Message{{Role: "user", Content: "Hi"}, {Role: "system", Content: "Be brief."}},
			opts: opts(false, nil),
			want: defaultSystem + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>system\nBe brief.<|im_end|>\n",
		},
		{
			name: "tools with a system message",
			msgs: []Message{{Role: "system", Content: "You are a bot."}, {Role: "user", Content: "Weather in Paris?"}},
			opts: opts(true, map[string]any{"tools": weatherTool}),
			want: "<|im_start|>system\nYou are a bot." + toolsBlock +
				"<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n",
		},
		{
			name: "tools without a system message",
			msgs: []Message{{Role: "user", Content: "Weather in Paris?"}},
			opts: opts(false, map[string]any{"tools": weatherTool}),
			want: "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant." + toolsBlock +
				"<|im_start|>user\nWeather in Paris?<|im_end|>\n",
		},
		{
			name: "empty tools list is falsy",
			msgs: []Message{{Role: "user", Content: "Hi"}},
			opts: opts(false, map[string]any{"tools": []any{}}),
			want: defaultSystem + "<|im_start|>user\nHi<|im_end|>\n",
		},
	})
}

func TestMistral7BInstruct(t *testing.T) {
	const alternate = "After the optional system message, conversation roles must alternate user/assistant/user/assistant/..."
	opts := func(agp bool) Options { return Options{AddGenerationPrompt: agp, BOSToken: "<s>", EOSToken: "</s>"} }
	runTemplateCases(t, "mistral-7b-instruct-v0.2.jinja", []templateCase{
		{
			name: "user only",
			msgs: []Message{{Role: "user", Content: "Hi"}},
			opts: opts(false),
			want: "<s> [INST] Hi [/INST]",
		},
		{
			name: "generation prompt changes nothing",
			msgs: []Message{{Role: "user", Content: "Hi"}},
			opts: opts(true),
			want: "<s> [INST] Hi [/INST]",
		},
		{
			name: "system message joins the first user turn",
			msgs: []Message{{Role: "system", Content: "You are a bot."}, {Role: "user", Content: "Hello"}, {Role: "assistant", Content: "Hi there!"}, {Role: "user", Content: "Bye"}},
			opts: opts(true),
			want: "<s> [INST] You are a bot.\n\nHello [/INST] Hi there!</s> [INST] Bye [/INST]",
		},
		{
			name: "multi-turn ending with the assistant",
			msgs: []Message{{Role: "user", Content: "1+1?"}, {Role: "assistant", Content: "2"}, {Role: "user", Content: "2+2?"}, {Role: "assistant", Content: "4"}},
			opts: opts(false),
			want: "<s> [INST] 1+1? [/INST] 2</s> [INST] 2+2? [/INST] 4</s>",
		},
		{
			name:    "two user turns in a row",
			msgs:    []Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}},
			opts:    opts(false),
			wantErr: alternate,
		},
		{
			name:    "assistant first after the system message",
			msgs:    []Message{{Role: "system", Content: "s"}, {Role: "assistant", Content: "a"}},
			opts:    opts(false),
			wantErr: alternate,
		},
		{
			name:    "other roles",
			msgs:    []Message{{Role: "user", Content: "a"}, {Role: "tool", Content: "b"}},
			opts:    opts(false),
			wantErr: "Only user and assistant roles are supported, with the exception of an initial optional system message!",
		},
	})

	// The error names the template line of the raise_exception call.
	_, err := loadTemplate(t, "mistral-7b-instruct-v0.2.jinja").Render([]Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}, opts(false))
	var re *RenderError
	if !errors.As(err, &re) || re.Line != 11 || re.Col != 13 {
		t.Errorf("alternation error = %v, want a RenderError at 11:13", err)
	}
}

func BenchmarkRender(b *testing.B) {
	for _, file := range []string{"llama-3.1-instruct.jinja", "qwen2.5-instruct.jinja", "mistral-7b-instruct-v0.2.jinja"} {
		b.Run(file, func(b *testing.B) {
			src, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				b.Fatal(err)
			}
			tmpl, err := Compile(string(src))
			if err != nil {
				b.Fatal(err)
			}
			msgs := []Message{{Role: "system", Content: "You are a bot."}}
			for i := range 20 {
				msgs = append(msgs, Message{Role: "user", Content: "question " + string(rune('a'+i))}, Message{Role: "assistant", Content: "answer"})
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tmpl.Render(msgs, Options{BOSToken: "<s>", EOSToken: "</s>"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestConcurrentRender(t *testing.T) {
	tmpl := loadTemplate(t, "qwen2.5-instruct.jinja")
	want, err := tmpl.Render([]Message{{Role: "user", Content: "Hi"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	for range 8 {
		go func() {
			got, _ := tmpl.Render([]Message{{Role: "user", Content: "Hi"}}, Options{})
			done <- got
		}()
	}
	for range 8 {
		if got := <-done; got != want {
			t.Errorf("concurrent Render = %q, want %q", got, want)
		}
	}
}
