package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The golden test renders every template under testdata/templates for
// every conversation in testdata/cases.json and compares the result byte
// for byte with testdata/golden/<template>__<conversation>.txt, which
// Python's Jinja2, set up as transformers sets it up, rendered
// (testdata/gen/render_golden.py). A golden that starts with "ERROR: "
// records that the template called raise_exception: kvq must fail with the
// same message. "ERROR (<class>): " records another Jinja2 exception (an
// undefined value used, a type error): kvq must fail too, with an error
// that ends with Jinja2's message.

// goldenCases is testdata/cases.json.
type goldenCases struct {
	Now           time.Time                    `json:"now"`
	Templates     map[string]map[string]string `json:"templates"`
	Tools         json.RawMessage              `json:"tools"`
	Conversations []goldenConversation         `json:"conversations"`
}

type goldenConversation struct {
	Name                string                     `json:"name"`
	AddGenerationPrompt bool                       `json:"add_generation_prompt"`
	Tools               bool                       `json:"tools"`
	Vars                map[string]json.RawMessage `json:"vars"`
	Messages            []map[string]json.RawMessage
}

// knownGoldenDiffs are the pairs kvq is known to render differently, with
// the reason. The test fails when one of them starts to match (so the list
// shrinks) or another pair stops matching.
var knownGoldenDiffs = map[string]string{}

// goldenMessages converts the JSON messages of a conversation.
func goldenMessages(t *testing.T, raw []map[string]json.RawMessage) []Message {
	t.Helper()
	msgs := make([]Message, len(raw))
	for i, m := range raw {
		for k, v := range m {
			var err error
			switch k {
			case "role":
				err = json.Unmarshal(v, &msgs[i].Role)
			case "content":
				err = json.Unmarshal(v, &msgs[i].Content)
			default:
				if msgs[i].Fields == nil {
					msgs[i].Fields = make(map[string]any)
				}
				msgs[i].Fields[k] = v
			}
			if err != nil {
				t.Fatalf("cases.json: message %d, %s: %v", i, k, err)
			}
		}
	}
	return msgs
}

// goldenOutcome compares kvq's render with the golden text. A golden
// "ERROR: msg" is a raise_exception(msg): kvq must fail with that
// *RaiseError. A golden "ERROR (Class): msg" is another Jinja2 exception:
// kvq must fail, not through raise_exception, with an error ending in msg.
func goldenOutcome(got string, err error, want string) (outcome, detail string) {
	var raise *RaiseError
	isRaise := errors.As(err, &raise)
	if wantMsg, ok := strings.CutPrefix(want, "ERROR: "); ok {
		switch {
		case err == nil:
			return "mismatch", "Jinja2 raised " + wantMsg + "; kvq rendered"
		case !isRaise:
			return "mismatch", fmt.Sprintf("kvq: %v, want raise_exception(%q)", err, wantMsg)
		case raise.Msg != wantMsg:
			return "mismatch", fmt.Sprintf("raise_exception(%q), want %q", raise.Msg, wantMsg)
		}
		return "raise", ""
	}
	if wantErr, ok := strings.CutPrefix(want, "ERROR ("); ok {
		switch {
		case err == nil:
			return "mismatch", "Jinja2 raised " + wantErr + "; kvq rendered"
		case isRaise:
			return "mismatch", fmt.Sprintf("raise_exception(%q), want (%s", raise.Msg, wantErr)
		case !strings.HasSuffix(err.Error(), wantErr[strings.Index(wantErr, "): ")+3:]):
			return "mismatch", fmt.Sprintf("kvq: %v, want (%s", err, wantErr)
		}
		return "error", fmt.Sprintf("Jinja2: (%s; kvq: %v", wantErr, err)
	}
	if err != nil {
		return "mismatch", "kvq: " + err.Error()
	}
	if got == want {
		return "match", ""
	}
	return "mismatch", firstDiff(got, want)
}

// firstDiff describes where got and want part.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	for i > 0 && !utf8.RuneStart(want[min(i, len(want)-1)]) {
		i--
	}
	from := max(0, i-40)
	for from > 0 && !utf8.RuneStart(want[from]) {
		from--
	}
	return fmt.Sprintf("at byte %d: got %q, want %q", i, clip(got[from:], i-from+40), clip(want[from:], i-from+40))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func TestGolden(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases goldenCases
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("cases.json: %v", err)
	}
	names := make([]string, 0, len(cases.Templates))
	for name := range cases.Templates {
		names = append(names, name)
	}
	slices.Sort(names)

	var table strings.Builder
	fmt.Fprintf(&table, "%-46s", "template")
	for _, c := range cases.Conversations {
		fmt.Fprintf(&table, " %-10s", c.Name)
	}
	table.WriteString("\n")
	counts := map[string]int{}
	var errorPairs []string
	checked := map[string]bool{}
	for _, name := range names {
		tokens := cases.Templates[name]
		src, err := os.ReadFile(filepath.Join("testdata", "templates", name+".jinja"))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, compileErr := Compile(string(src))
		fmt.Fprintf(&table, "%-46s", name)
		for _, conv := range cases.Conversations {
			pair := name + "__" + conv.Name
			checked[pair+".txt"] = true
			want, err := os.ReadFile(filepath.Join("testdata", "golden", pair+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			var got string
			err = compileErr
			if err == nil {
				extra := map[string]any{}
				for k, v := range conv.Vars {
					extra[k] = v
				}
				if conv.Tools {
					extra["tools"] = cases.Tools
				}
				got, err = tmpl.Render(goldenMessages(t, conv.Messages), Options{
					AddGenerationPrompt: conv.AddGenerationPrompt,
					BOSToken:            tokens["bos_token"],
					EOSToken:            tokens["eos_token"],
					Now:                 func() time.Time { return cases.Now },
					Extra:               extra,
				})
			}
			outcome, detail := goldenOutcome(got, err, string(want))
			counts[outcome]++
			mark := map[string]string{"match": "ok", "raise": "raise", "error": "error", "mismatch": "DIFF"}[outcome]
			if outcome == "error" {
				errorPairs = append(errorPairs, pair+": "+detail)
			}
			fmt.Fprintf(&table, " %-10s", mark)
			reason, known := knownGoldenDiffs[pair]
			switch {
			case outcome == "mismatch" && !known:
				t.Errorf("%s: %s", pair, detail)
			case outcome != "mismatch" && known:
				t.Errorf("%s now matches; remove it from knownGoldenDiffs (%s)", pair, reason)
			}
		}
		table.WriteString("\n")
	}
	files, err := os.ReadDir(filepath.Join("testdata", "golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !checked[f.Name()] {
			t.Errorf("testdata/golden/%s belongs to no template and conversation of cases.json", f.Name())
		}
	}
	t.Logf("kvq against Jinja2 (ok: same text; raise: same raise_exception message; "+
		"error: both fail otherwise; DIFF: differs)\n%s"+
		"%d pairs: %d same text, %d same raise_exception, %d fail in both, %d differ\n"+
		"failing in both otherwise:\n\t%s",
		table.String(), counts["match"]+counts["raise"]+counts["error"]+counts["mismatch"],
		counts["match"], counts["raise"], counts["error"], counts["mismatch"], strings.Join(errorPairs, "\n\t"))
}
