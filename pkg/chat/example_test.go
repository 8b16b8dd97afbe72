package chat_test

import (
	"fmt"
	"time"

	"github.com/kvqlabs/kvq/pkg/chat"
)

func ExampleRender() {
	// The chat template of Qwen2.5-Instruct, abridged.
	const tmpl = `{%- for message in messages %}
    {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}`
	out, err := chat.Render(tmpl, []chat.Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "Hello!"},
	}, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(out)
	// Output:
	// <|im_start|>system
	// You are a helpful assistant.<|im_end|>
	// <|im_start|>user
	// Hello!<|im_end|>
	// <|im_start|>assistant
}

func ExampleCompile() {
	t, err := chat.Compile(`{{ bos_token }}Today is {{ strftime_now("%d %b %Y") }}.
{% for m in messages %}[{{ m.role }}] {{ m.content }}{% if not loop.last %} {% endif %}{% endfor %}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	clock := func() time.Time { return time.Date(2024, 7, 26, 12, 0, 0, 0, time.UTC) }
	out, err := t.Render([]chat.Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello"}},
		chat.Options{BOSToken: "<s>", Now: clock})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out)
	// Output:
	// <s>Today is 26 Jul 2024.
	// [user] Hi [assistant] Hello
}

func ExampleRaiseError() {
	_, err := chat.Render(`{{ raise_exception('Conversation roles must alternate') }}`, nil, chat.Options{})
	fmt.Println(err)
	// Output:
	// chat: render error at 1:4: Conversation roles must alternate
}
