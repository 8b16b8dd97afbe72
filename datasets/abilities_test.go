package datasets

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// abilityGens makes a few examples of each ability generator, at the
// sizes the tests use.
var abilityGens = []struct {
	task string
	gen  func(g *Generator) Example
}{
	{TaskMultiHop, func(g *Generator) Example { return g.MultiHop(4, 12) }},
	{TaskMultiHop + " 1 hop", func(g *Generator) Example { return g.MultiHop(1, 3) }},
	{TaskCitation, func(g *Generator) Example { return g.Citation(6) }},
	{TaskToolCall, func(g *Generator) Example { return g.ToolCall() }},
}

func TestAbilityTasks(t *testing.T) {
	want := []string{TaskMultiHop, TaskCitation, TaskToolCall}
	if got := AbilityTasks(); !slices.Equal(got, want) {
		t.Errorf("AbilityTasks() = %q, want %q", got, want)
	}
	for _, name := range AbilityTasks() {
		if err := CheckAbilityTask(name); err != nil {
			t.Errorf("CheckAbilityTask(%q) = %v, want nil", name, err)
		}
		if slices.Contains(Tasks(), name) {
			t.Errorf("ability task %q is in Tasks() too", name)
		}
	}
	for _, name := range []string{TaskPasskey, "multi-hop", ""} {
		err := CheckAbilityTask(name)
		if err == nil || !strings.Contains(err.Error(), TaskToolCall) {
			t.Errorf("CheckAbilityTask(%q) = %v, want an error listing the tasks", name, err)
		}
	}
}

// TestAbilityExamples: the same seed gives the same examples, another seed
// or split other ones; every example has its task, a plain ASCII prompt
// and an answer ending in one newline.
func TestAbilityExamples(t *testing.T) {
	for _, tc := range abilityGens {
		t.Run(tc.task, func(t *testing.T) {
			texts := func(split Split, seed uint64) []string {
				g := New(split, seed)
				var out []string
				for range 20 {
					e := tc.gen(g)
					task, _, _ := strings.Cut(tc.task, " ")
					if e.Task != task {
						t.Fatalf("Task = %q, want %q", e.Task, task)
					}
					if !strings.HasSuffix(e.Answer, "\n") || strings.Count(e.Answer, "\n") != 1 {
						t.Fatalf("answer %q does not end in its only newline", e.Answer)
					}
					for i := 0; i < len(e.Text()); i++ {
						if c := e.Text()[i]; c != '\n' && (c < ' ' || c > '~') {
							t.Fatalf("byte %#x at %d is not printable ASCII:\n%s", c, i, e.Text())
						}
					}
					out = append(out, e.Text())
				}
				return out
			}
			a := texts(Eval, 7)
			if b := texts(Eval, 7); !slices.Equal(a, b) {
				t.Error("two eval generators with seed 7 differ")
			}
			if b := texts(Eval, 8); slices.Equal(a, b) || a[0] == b[0] {
				t.Error("eval seeds 7 and 8 give the same examples")
			}
			if b := texts(Train, 7); a[0] == b[0] {
				t.Error("train and eval generators with seed 7 give the same example")
			}
			if n := len(slices.Compact(slices.Sorted(slices.Values(a)))); n < 15 {
				t.Errorf("20 draws of one generator give only %d distinct examples", n)
			}
		})
	}
}

// templateText holds every fixed English word of the ability prompts and
// answers (the tools' schemas are added from tools).
const templateText = `Here are keys. Each points to another key or to a number.
Question: What does lead to after step steps? Answer: leads to
Answer the question from the passages and cite the passage number in brackets.
lives in and works as a an. Where does live? What does work as?
You can call the tool below. Reply with the call as one line of JSON. Tool: User: Call:
type function name description parameters object properties required arguments
Please book a table under the name in on day of the month for people
What will the weather be in over the next days day
Please send a message to with the text
Please add a contact named who works as a an aged`

// lowerWords returns the lower-cased runs of letters in s.
func lowerWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) })
}

// splitWords is the set of words (lower-cased) of split s's pools of
// invented words.
func splitWords(s Split) map[string]bool {
	p := buildPools(s)
	set := map[string]bool{}
	for _, pool := range [][]string{p.names, p.cities, p.jobs, p.topics, p.keys} {
		for _, w := range pool {
			set[strings.ToLower(w)] = true
		}
	}
	return set
}

// TestAbilityHeldOut: each split's ability examples use, besides the fixed
// template words, only words of that split's pools (which share no word,
// TestSplitsDisjoint), and multi-hop's numbers are the split's too; the
// people, cities, jobs, keys and arguments they ask about are in the split
// and not in the other.
func TestAbilityHeldOut(t *testing.T) {
	template := map[string]bool{}
	text := templateText
	for _, tl := range tools {
		text += " " + tl.name + " " + tl.desc
		for _, p := range tl.params {
			text += " " + p.name + " " + p.typ + " " + p.desc
		}
	}
	for _, w := range lowerWords(text) {
		template[w] = true
	}
	for _, split := range []Split{Eval, Train} {
		own, other := splitWords(split), splitWords(1-split)
		g := New(split, 21)
		for _, tc := range abilityGens {
			for i := range 30 {
				e := tc.gen(g)
				for _, w := range lowerWords(e.Text()) {
					if !template[w] && !own[w] {
						t.Fatalf("%s %s example %d: word %q is neither a template word nor in the %s pools:\n%s", split, tc.task, i, w, split, e.Text())
					}
				}
				// The facts asked about, checked whether or not they
				// happen to be spelled like a template word.
				var facts []string
				switch e.Task {
				case TaskMultiHop:
					for _, l := range chainLines(e.Prompt) {
						from, to, ok := strings.Cut(strings.TrimSuffix(l, "."), " points to ")
						if !ok {
							continue
						}
						facts = append(facts, lowerWords(from)...)
						if _, err := strconv.Atoi(to); err == nil {
							if !inSplit(to, split) || inSplit(to, 1-split) {
								t.Fatalf("%s multi-hop number %s is not of the split", split, to)
							}
						} else {
							facts = append(facts, lowerWords(to)...)
						}
					}
				case TaskCitation:
					facts = lowerWords(e.Meta["person"] + " " + e.Meta["answer"])
				case TaskToolCall:
					var args map[string]any
					if err := json.Unmarshal([]byte(e.Meta["arguments"]), &args); err != nil {
						t.Fatalf("tool call arguments %s: %v", e.Meta["arguments"], err)
					}
					for _, v := range args {
						if s, ok := v.(string); ok {
							facts = append(facts, lowerWords(s)...)
						}
					}
				}
				if len(facts) == 0 {
					t.Fatalf("%s %s: no facts found in:\n%s", split, tc.task, e.Text())
				}
				for _, w := range facts {
					if !own[w] || other[w] {
						t.Fatalf("%s %s: %q is not held in the %s split (own %v, other %v)", split, tc.task, w, split, own[w], other[w])
					}
				}
			}
		}
	}
}

// chainLines returns the lines of a multi-hop prompt between its first
// line (the instruction) and the question.
func chainLines(prompt string) []string {
	lines := strings.Split(prompt, "\n")
	q := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "Question: ") })
	if q < 1 {
		return nil
	}
	return lines[1:q]
}

// followChain follows start through a multi-hop prompt's "a points to b."
// lines for hops steps and returns where it ends and whether every step
// but the last led to a key (a line of its own).
func followChain(t *testing.T, prompt, start string, hops int) (string, bool) {
	t.Helper()
	next := map[string]string{}
	for _, l := range chainLines(prompt) {
		from, to, ok := strings.Cut(l, " points to ")
		if !ok || strings.Contains(from, " ") || !strings.HasSuffix(to, ".") {
			t.Fatalf("line %q is not %q:\n%s", l, "a points to b.", prompt)
		}
		if _, dup := next[from]; dup {
			t.Fatalf("key %q has two lines:\n%s", from, prompt)
		}
		next[from] = strings.TrimSuffix(to, ".")
	}
	at := start
	for i := range hops {
		to, ok := next[at]
		if !ok {
			return at, false
		}
		at = to
		if _, isKey := next[at]; isKey == (i == hops-1) {
			return at, false
		}
	}
	return at, true
}

func TestMultiHop(t *testing.T) {
	for _, tc := range []struct{ hops, distractors int }{{1, 0}, {1, 5}, {2, 2}, {3, 0}, {4, 12}, {4, 13}, {8, 40}} {
		t.Run(fmt.Sprintf("hops=%d,distractors=%d", tc.hops, tc.distractors), func(t *testing.T) {
			g := New(Eval, uint64(tc.hops*100+tc.distractors))
			for i := range 20 {
				e := g.MultiHop(tc.hops, tc.distractors)
				start, answer := e.Meta["start"], e.Meta["answer"]
				if e.Meta["hops"] != strconv.Itoa(tc.hops) || e.Meta["distractors"] != strconv.Itoa(tc.distractors) {
					t.Fatalf("Meta = %v", e.Meta)
				}
				steps := "steps"
				if tc.hops == 1 {
					steps = "step"
				}
				if want := fmt.Sprintf("\nQuestion: What does %s lead to after %d %s?\nAnswer: %s leads to ", start, tc.hops, steps, start); !strings.HasSuffix(e.Prompt, want) {
					t.Fatalf("prompt does not end with %q:\n%s", want, e.Prompt)
				}
				if lines := len(chainLines(e.Prompt)); lines != tc.hops+tc.distractors {
					t.Fatalf("%d lines, want %d:\n%s", lines, tc.hops+tc.distractors, e.Prompt)
				}
				end, ok := followChain(t, e.Prompt, start, tc.hops)
				if !ok || end+".\n" != e.Answer || end != answer {
					t.Fatalf("example %d: %s leads in %d hops to %q (a chain of keys ending there: %v), answer %q:\n%s", i, start, tc.hops, end, ok, e.Answer, e.Prompt)
				}
				if n := strings.Count(e.Prompt, " "+answer+"."); n != 1 {
					t.Fatalf("answer %s stated %d times:\n%s", answer, n, e.Prompt)
				}
				if _, err := strconv.Atoi(answer); err != nil || len(answer) < 4 || len(answer) > 6 {
					t.Fatalf("answer %q is not a 4-6 digit number", answer)
				}
			}
		})
	}
	// A line is 24 to 39 bytes, so twice the lines and more always make a
	// longer prompt, whether they are hops or distractors.
	g := New(Eval, 1)
	for _, n := range []int{1, 5, 9, 21} {
		if a, b := len(g.MultiHop(n, 4).Prompt), len(g.MultiHop(2*n+4, 4).Prompt); b <= a {
			t.Errorf("MultiHop(%d, 4) prompt of %d bytes, MultiHop(%d, 4) of %d", n, a, 2*n+4, b)
		}
		if a, b := len(g.MultiHop(3, n).Prompt), len(g.MultiHop(3, 2*n+4).Prompt); b <= a {
			t.Errorf("MultiHop(3, %d) prompt of %d bytes, MultiHop(3, %d) of %d", n, a, 2*n+4, b)
		}
	}
}

func TestCitation(t *testing.T) {
	fields := map[string]int{}
	for _, n := range []int{1, 2, 5, 20} {
		t.Run(fmt.Sprintf("passages=%d", n), func(t *testing.T) {
			g := New(Eval, uint64(n))
			for range 30 {
				e := g.Citation(n)
				lines := strings.Split(e.Prompt, "\n")
				if len(lines) != n+3 || e.Meta["passages"] != strconv.Itoa(n) {
					t.Fatalf("%d lines (Meta %v), want %d passages, the instruction and the question:\n%s", len(lines), e.Meta, n, e.Prompt)
				}
				// The question names a person; the one passage about
				// them states the asked fact.
				q, ok := strings.CutPrefix(lines[n+1], "Question: ")
				if !ok {
					t.Fatalf("no question after the passages:\n%s", e.Prompt)
				}
				var person, field string
				if p, ok := strings.CutPrefix(q, "Where does "); ok {
					person, field = strings.TrimSuffix(p, " live?"), "city"
				} else if p, ok := strings.CutPrefix(q, "What does "); ok {
					person, field = strings.TrimSuffix(p, " work as?"), "job"
				}
				if person != e.Meta["person"] || field != e.Meta["field"] {
					t.Fatalf("question %q, Meta %v", q, e.Meta)
				}
				fields[field]++
				id, fact := "", ""
				seen := map[string]bool{}
				for j, l := range lines[1 : n+1] {
					pid := strconv.Itoa(j + 1)
					body, ok := strings.CutPrefix(l, "["+pid+"] ")
					if !ok || !strings.HasSuffix(body, ".") {
						t.Fatalf("passage %d is %q", j+1, l)
					}
					name, facts := splitPassage(t, strings.TrimSuffix(body, "."))
					if seen[name] {
						t.Fatalf("two passages about %s:\n%s", name, e.Prompt)
					}
					seen[name] = true
					if name == person {
						id, fact = pid, facts[field]
					}
				}
				if id == "" || id != e.Meta["passage"] || fact != e.Meta["answer"] || e.Answer != fact+" ["+id+"]\n" {
					t.Fatalf("passage [%s] states %s %q; Meta %v, answer %q:\n%s", id, field, fact, e.Meta, e.Answer, e.Prompt)
				}
				for j, l := range lines[1 : n+1] {
					if _, facts := splitPassage(t, strings.TrimSuffix(l[strings.Index(l, "] ")+2:], ".")); facts[field] == fact && strconv.Itoa(j+1) != id {
						t.Fatalf("passages [%s] and [%d] both state %s %q", id, j+1, field, fact)
					}
				}
				restated := e.Meta["person"] + " lives in "
				if field == "job" {
					restated = e.Meta["person"] + " works as " + article(fact) + " "
				}
				if !strings.HasSuffix(e.Prompt, "\nAnswer: "+restated) {
					t.Fatalf("prompt does not end by restating %q:\n%s", restated, e.Prompt)
				}
			}
		})
	}
	if fields["city"] < 20 || fields["job"] < 20 {
		t.Errorf("asked fields %v, want both often", fields)
	}
	// A passage is 48 to 90 bytes and the question varies by about 50, so
	// four times the passages always make a longer prompt.
	g := New(Eval, 1)
	for _, n := range []int{1, 2, 8} {
		if a, b := len(g.Citation(n).Prompt), len(g.Citation(4*n).Prompt); b <= a {
			t.Errorf("Citation(%d) prompt of %d bytes, Citation(%d) of %d", n, a, 4*n, b)
		}
	}
}

// splitPassage splits "First Last lives in City and works as a job" (the
// facts in either order) into the name and the facts by field.
func splitPassage(t *testing.T, body string) (string, map[string]string) {
	t.Helper()
	facts := map[string]string{}
	name, rest, ok := strings.Cut(body, " lives in ")
	if before, after, ok2 := strings.Cut(body, " works as "); ok2 && (!ok || len(before) < len(name)) {
		name, rest = before, "works as "+after
	} else {
		rest = "lives in " + rest
	}
	for _, f := range strings.Split(rest, " and ") {
		if c, ok := strings.CutPrefix(f, "lives in "); ok {
			facts["city"] = c
		} else if j, ok := strings.CutPrefix(f, "works as "); ok {
			art, job, _ := strings.Cut(j, " ")
			if art != article(job) {
				t.Fatalf("passage %q: %q before %q", body, art, job)
			}
			facts["job"] = job
		}
	}
	if len(facts) != 2 || len(strings.Fields(name)) != 2 {
		t.Fatalf("passage %q: name %q, facts %v", body, name, facts)
	}
	return name, facts
}

// toolSchema is the part of an OpenAI function-calling tool that ToolCall
// prompts state.
type toolSchema struct {
	Type     string `json:"type"`
	Function struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Parameters  struct {
			Type       string `json:"type"`
			Properties map[string]struct {
				Type        string `json:"type"`
				Description string `json:"description"`
			} `json:"properties"`
			Required []string `json:"required"`
		} `json:"parameters"`
	} `json:"function"`
}

// objectKeys returns the keys of the JSON object data, in order.
func objectKeys(t *testing.T, data []byte) []string {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var keys []string
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// TestToolCall: the prompt's tool schema parses, in the OpenAI shape; the
// answer is one JSON line calling that tool with exactly its required
// parameters, in the schema's order, of the schema's types, each value
// stated in the user's request; all tool shapes occur.
func TestToolCall(t *testing.T) {
	g := New(Eval, 4)
	used := map[string]int{}
	for i := range 200 {
		e := g.ToolCall()
		lines := strings.Split(e.Prompt, "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[1], "Tool: ") || !strings.HasPrefix(lines[2], "User: ") || lines[3] != "Call: " {
			t.Fatalf("prompt is not instruction, tool, request, call:\n%s", e.Prompt)
		}
		schemaText := strings.TrimPrefix(lines[1], "Tool: ")
		var schema toolSchema
		if err := json.Unmarshal([]byte(schemaText), &schema); err != nil {
			t.Fatalf("schema %s: %v", schemaText, err)
		}
		fn := schema.Function
		if schema.Type != "function" || fn.Parameters.Type != "object" || fn.Name == "" || fn.Description == "" || len(fn.Parameters.Required) == 0 {
			t.Fatalf("schema %s is not a function tool", schemaText)
		}
		var props []string
		for p := range fn.Parameters.Properties {
			props = append(props, p)
		}
		if !slices.Equal(slices.Sorted(slices.Values(props)), slices.Sorted(slices.Values(fn.Parameters.Required))) {
			t.Fatalf("schema properties %v, required %v", props, fn.Parameters.Required)
		}
		used[fn.Name]++

		if !strings.HasPrefix(e.Answer, `{"name": `) {
			t.Fatalf("answer %q does not start with the name", e.Answer)
		}
		if got := objectKeys(t, []byte(e.Answer)); !slices.Equal(got, []string{"name", "arguments"}) {
			t.Fatalf("answer keys %v, want name, arguments", got)
		}
		var call struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(e.Answer), &call); err != nil {
			t.Fatalf("answer %q: %v", e.Answer, err)
		}
		if call.Name != fn.Name || e.Meta["name"] != fn.Name || string(call.Arguments) != e.Meta["arguments"] {
			t.Fatalf("call %q of tool %q, Meta %v", e.Answer, fn.Name, e.Meta)
		}
		if got := objectKeys(t, call.Arguments); !slices.Equal(got, fn.Parameters.Required) {
			t.Fatalf("arguments %v, want the schema's %v in its order", got, fn.Parameters.Required)
		}
		var args map[string]any
		dec := json.NewDecoder(bytes.NewReader(call.Arguments))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			t.Fatal(err)
		}
		request := strings.TrimPrefix(lines[2], "User: ")
		for name, v := range args {
			var stated string
			switch typ := fn.Parameters.Properties[name].Type; typ {
			case "string":
				s, ok := v.(string)
				if !ok || s == "" {
					t.Fatalf("argument %s = %v, want a string", name, v)
				}
				stated = s
			case "integer":
				n, ok := v.(json.Number)
				if _, err := n.Int64(); !ok || err != nil {
					t.Fatalf("argument %s = %v, want an integer", name, v)
				}
				stated = n.String()
				if !slices.Contains(strings.FieldsFunc(request, func(r rune) bool { return !unicode.IsDigit(r) }), stated) {
					t.Fatalf("example %d: argument %s = %s is not a number in %q", i, name, stated, request)
				}
			default:
				t.Fatalf("parameter %s of type %q", name, typ)
			}
			if !strings.Contains(request, stated) {
				t.Fatalf("example %d: argument %s = %q is not stated in %q", i, name, stated, request)
			}
		}
	}
	if len(used) != len(tools) {
		t.Errorf("tools used %v, want all %d", used, len(tools))
	}
	for _, tl := range tools {
		if used[tl.name] < 20 {
			t.Errorf("tool %s in %d of 200 examples", tl.name, used[tl.name])
		}
	}
}

func TestDepths(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []float64
	}{
		{-1, nil}, {0, nil}, {1, []float64{0}}, {2, []float64{0, 1}},
		{3, []float64{0, 0.5, 1}}, {5, []float64{0, 0.25, 0.5, 0.75, 1}},
	} {
		if got := Depths(tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("Depths(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
	ds := Depths(35) // NIAH's default grid
	if len(ds) != 35 || ds[0] != 0 || ds[34] != 1 {
		t.Fatalf("Depths(35) = %v", ds)
	}
	for i := 1; i < len(ds); i++ {
		if d := ds[i] - ds[i-1]; d < 1.0/34-1e-12 || d > 1.0/34+1e-12 {
			t.Errorf("Depths(35)[%d]-[%d] = %v, want 1/34", i, i-1, d)
		}
	}
}

func TestPasskeyGrid(t *testing.T) {
	contexts, depths := []int{300, 1000, 2000}, Depths(4)
	grid := New(Eval, 5).PasskeyGrid(contexts, depths)
	if len(grid) != len(contexts)*len(depths) {
		t.Fatalf("PasskeyGrid(%v, %v) gave %d examples, want %d", contexts, depths, len(grid), len(contexts)*len(depths))
	}
	ref := New(Eval, 5)
	for i, c := range contexts {
		for j, d := range depths {
			e := grid[i*len(depths)+j]
			want := ref.Passkey(c, d)
			if e.Task != TaskPasskey || e.Text() != want.Text() {
				t.Fatalf("cell (%d, %d) is not Passkey(%d, %v) drawn in row-major order", i, j, c, d)
			}
			if e.Meta["context"] != strconv.Itoa(c) || e.Meta["depth"] != strconv.FormatFloat(d, 'f', 2, 64) || e.Meta["key"] != want.Meta["key"] {
				t.Fatalf("cell (%d, %d) Meta %v, want context %d, depth %v", i, j, e.Meta, c, d)
			}
			fb, _ := strconv.Atoi(e.Meta["filler_bytes"])
			if fb > c || fb <= c-len(fillerText) || len(e.Prompt) < fb || len(e.Prompt) > fb+250 {
				t.Errorf("cell (%d, %d): %d filler bytes, prompt of %d, for context %d", i, j, fb, len(e.Prompt), c)
			}
			if !strings.HasSuffix(e.Answer, "\n") {
				t.Errorf("cell (%d, %d) answer %q", i, j, e.Answer)
			}
		}
	}
	// Depth 0 puts the needle before all filler, depth 1 after it.
	first, last := grid[len(depths)*2], grid[len(depths)*3-1]
	if !strings.Contains(first.Prompt, "it.\nThe pass key is ") || !strings.Contains(last.Prompt, "again. The pass key is ") ||
		!strings.Contains(last.Prompt, "pass key. \nQuestion") {
		t.Errorf("depth 0 and 1 needles misplaced:\n%s\n---\n%s", first.Prompt, last.Prompt)
	}
	if g := New(Eval, 5).PasskeyGrid(nil, depths); len(g) != 0 {
		t.Errorf("PasskeyGrid(nil, ...) gave %d examples", len(g))
	}
	if g := New(Eval, 5).PasskeyGrid(contexts, nil); len(g) != 0 {
		t.Errorf("PasskeyGrid(..., nil) gave %d examples", len(g))
	}
}
