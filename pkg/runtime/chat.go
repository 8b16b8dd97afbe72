package runtime

import (
	"errors"
	"fmt"

	"github.com/kvqlabs/kvq/pkg/chat"
)

// ErrNoChatTemplate reports a model without a chat template.
var ErrNoChatTemplate = errors.New("runtime: model has no chat template")

// ChatPrompt renders msgs with the model's chat template (with the
// generation prompt appended) and tokenizes the result, special tokens in the
// text included. BOS is not added again: templates write it themselves.
func (m *Model) ChatPrompt(msgs []chat.Message) ([]int, string, error) {
	return m.ChatPromptExtra(msgs, nil)
}

// ChatPromptExtra is ChatPrompt with further template variables, such as
// "tools" (see chat.Options.Extra).
func (m *Model) ChatPromptExtra(msgs []chat.Message, extra map[string]any) ([]int, string, error) {
	return m.renderChat(msgs, chat.Options{AddGenerationPrompt: true, Extra: extra})
}

// ChatConversation renders a whole conversation, the assistant's turns
// included, with the model's chat template and no generation prompt (what
// calibration and training read), and tokenizes it like ChatPrompt.
func (m *Model) ChatConversation(msgs []chat.Message) ([]int, string, error) {
	return m.renderChat(msgs, chat.Options{})
}

func (m *Model) renderChat(msgs []chat.Message, opts chat.Options) ([]int, string, error) {
	if m.ChatTemplate == "" {
		return nil, "", fmt.Errorf("%w (%s)", ErrNoChatTemplate, m.Path)
	}
	tok := m.Tokenizer
	if b := tok.BOS(); b >= 0 {
		opts.BOSToken = tok.Token(b)
	}
	if e := tok.EOS(); e >= 0 {
		opts.EOSToken = tok.Token(e)
	}
	text, err := chat.Render(m.ChatTemplate, msgs, opts)
	if err != nil {
		return nil, "", fmt.Errorf("chat template of %s: %w", m.Path, err)
	}
	return tok.EncodeWithSpecials(text, false), text, nil
}
