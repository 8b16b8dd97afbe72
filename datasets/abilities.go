package datasets

// Ability tasks: held-out probes of what low-bit KV caches break beyond a
// single lookup (multi-hop tracking, cited answers, tool calls), and the
// passkey grid of long-context evaluation. They live apart from Tasks and
// Sample on purpose: Sample's stream (and so the shipped probe model's
// training data) and the training mixer's TaskMix, indexed in Tasks order,
// stay exactly as they were. Every method here draws only from the
// Generator's own rng and split-specific pools, so an eval generator's
// examples use held-out words only.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Ability task names.
const (
	TaskMultiHop = "multihop"
	TaskCitation = "citation"
	TaskToolCall = "toolcall"
)

// AbilityTasks lists the ability tasks (not in Tasks, which is what the
// probe model trains on).
func AbilityTasks() []string {
	return []string{TaskMultiHop, TaskCitation, TaskToolCall}
}

// CheckAbilityTask reports an error naming the ability tasks when name is
// not one.
func CheckAbilityTask(name string) error {
	if !slices.Contains(AbilityTasks(), name) {
		return fmt.Errorf("unknown ability task %q (have %s)", name, strings.Join(AbilityTasks(), ", "))
	}
	return nil
}

// MultiHop lists lines "a-12 points to b-34." that chain keys to keys and
// end each chain at a number ("c-56 points to 4821."), in random order, and
// asks where a start key leads after hops steps: the number at the end of
// a chain of exactly hops lines. The other distractors lines form chains of
// their own, as long as the asked one (the last one shorter when hops does
// not divide distractors), over keys and numbers of their own: RULER's
// variable tracking (vt) with MultiKey's key format. As in MultiKey, the
// answer line restates the start ("Answer: a-12 leads to "), and the
// Answer is the number and the period that follows it in its line
// ("4821.\n"), so each hop is a lookup of a key's line and the last is a
// copy of its continuation. Keys and numbers are all distinct.
//
// Meta: hops, distractors, start, answer (the number). MultiHop panics if
// hops < 1 or distractors < 0 (a programmer error).
func (g *Generator) MultiHop(hops, distractors int) Example {
	if hops < 1 || distractors < 0 {
		panic(fmt.Sprintf("datasets: MultiHop(%d, %d): need hops >= 1 and distractors >= 0", hops, distractors))
	}
	keys, values := map[string]bool{}, map[string]bool{}
	// chain returns the lines of a chain of n keys ending at a number, its
	// start and that number.
	chain := func(n int) (lines []string, start, end string) {
		ks := make([]string, n)
		for i := range ks {
			k := g.key()
			for keys[k] {
				k = g.key()
			}
			keys[k] = true
			ks[i] = k
		}
		v := g.digits(4 + g.rng.IntN(3))
		for values[v] {
			v = g.digits(4 + g.rng.IntN(3))
		}
		values[v] = true
		for i, k := range ks {
			next := v
			if i+1 < n {
				next = ks[i+1]
			}
			lines = append(lines, k+" points to "+next+".\n")
		}
		return lines, ks[0], v
	}
	lines, start, answer := chain(hops)
	for left := distractors; left > 0; left -= hops {
		more, _, _ := chain(min(hops, left))
		lines = append(lines, more...)
	}
	g.rng.Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	steps := "steps"
	if hops == 1 {
		steps = "step"
	}
	var s strings.Builder
	s.WriteString("Here are keys. Each points to another key or to a number.\n")
	for _, l := range lines {
		s.WriteString(l)
	}
	fmt.Fprintf(&s, "Question: What does %s lead to after %d %s?\nAnswer: %s leads to ", start, hops, steps, start)
	return Example{Task: TaskMultiHop, Prompt: s.String(), Answer: answer + ".\n",
		Meta: map[string]string{"hops": strconv.Itoa(hops), "distractors": strconv.Itoa(distractors), "start": start, "answer": answer}}
}

// Citation states passages numbered passages, one line each ("[3] Dabo
// Kira lives in Trimos and works as a stelo.", the two facts in random
// order), each about a different invented person, and asks for the city or
// the job of one of them, citing the passage: the Answer is the fact and
// the passage number in brackets ("Trimos [3]\n"), so that an exact-match
// and a citation metric (the bracketed numbers, as LongBench's
// passage_retrieval) can both score it. The answer line restates the
// question's person and verb ("Answer: Dabo Kira lives in ") as MultiKey
// restates its key. No other passage states the asked city or job, so the
// fact alone names the passage too.
//
// Meta: passage (the number), passages, field ("city" or "job"), person,
// answer (the fact). Citation panics if passages < 1 (a programmer error).
func (g *Generator) Citation(passages int) Example {
	if passages < 1 {
		panic(fmt.Sprintf("datasets: Citation(%d): need passages >= 1", passages))
	}
	type person struct{ name, city, job string }
	asked := g.rng.IntN(passages)
	field := "city"
	if g.rng.IntN(2) == 0 {
		field = "job"
	}
	people := make([]person, passages)
	named := map[string]bool{}
	// The asked passage is drawn first, so that the others can avoid its
	// city and job.
	for n := range passages {
		i := (asked + n) % passages
		p := person{name: g.pick(g.pools.names) + " " + g.pick(g.pools.names)}
		for named[p.name] {
			p.name = g.pick(g.pools.names) + " " + g.pick(g.pools.names)
		}
		named[p.name] = true
		p.city, p.job = g.pick(g.pools.cities), g.pick(g.pools.jobs)
		for n > 0 && p.city == people[asked].city {
			p.city = g.pick(g.pools.cities)
		}
		for n > 0 && p.job == people[asked].job {
			p.job = g.pick(g.pools.jobs)
		}
		people[i] = p
	}
	var s strings.Builder
	s.WriteString("Answer the question from the passages and cite the passage number in brackets.\n")
	for i, p := range people {
		facts := []string{"lives in " + p.city, "works as " + article(p.job) + " " + p.job}
		if g.rng.IntN(2) == 0 {
			facts[0], facts[1] = facts[1], facts[0]
		}
		fmt.Fprintf(&s, "[%d] %s %s and %s.\n", i+1, p.name, facts[0], facts[1])
	}
	p := people[asked]
	answer := p.city
	if field == "city" {
		fmt.Fprintf(&s, "Question: Where does %s live?\nAnswer: %s lives in ", p.name, p.name)
	} else {
		answer = p.job
		fmt.Fprintf(&s, "Question: What does %s work as?\nAnswer: %s works as %s ", p.name, p.name, article(p.job))
	}
	id := strconv.Itoa(asked + 1)
	return Example{Task: TaskCitation, Prompt: s.String(), Answer: answer + " [" + id + "]\n",
		Meta: map[string]string{"passage": id, "passages": strconv.Itoa(passages), "field": field, "person": p.name, "answer": answer}}
}

// toolParam is one parameter of a tool: all are required.
type toolParam struct{ name, typ, desc string }

// tool is a function a ToolCall prompt offers.
type tool struct {
	name, desc string
	params     []toolParam
}

// tools are ToolCall's tool shapes, each with its own request template.
var tools = []tool{
	{"book_table", "Book a table at a restaurant.", []toolParam{
		{"guest", "string", "Full name the table is booked under"},
		{"city", "string", "City of the restaurant"},
		{"day", "integer", "Day of the month"},
		{"people", "integer", "Number of people"},
	}},
	{"get_weather", "Get the weather forecast for a city.", []toolParam{
		{"city", "string", "Name of the city"},
		{"days", "integer", "Number of days to forecast"},
	}},
	{"send_message", "Send a text message to a person.", []toolParam{
		{"to", "string", "Full name of the recipient"},
		{"text", "string", "Text of the message"},
	}},
	{"add_contact", "Add a person to the address book.", []toolParam{
		{"name", "string", "Full name of the person"},
		{"job", "string", "Job of the person"},
		{"age", "integer", "Age in years"},
	}},
}

// schema is t as one line of JSON in the shape of an OpenAI function-calling
// tool, keys in a fixed order.
func (t tool) schema() string {
	var props, req []string
	for _, p := range t.params {
		props = append(props, fmt.Sprintf("%q: {\"type\": %q, \"description\": %q}", p.name, p.typ, p.desc))
		req = append(req, strconv.Quote(p.name))
	}
	return fmt.Sprintf(`{"type": "function", "function": {"name": %q, "description": %q, "parameters": {"type": "object", "properties": {%s}, "required": [%s]}}}`,
		t.name, t.desc, strings.Join(props, ", "), strings.Join(req, ", "))
}

// ToolCall offers one tool (of four shapes: book_table, get_weather,
// send_message, add_contact) as an OpenAI-style JSON schema, then a user
// request that states every argument in prose, in random order, and asks
// for the call as one JSON line with the schema's parameter order:
// {"name": "get_weather", "arguments": {"city": "Trimos", "days": 3}}.
// String arguments are names, cities, jobs and topic words of the split;
// integers are small counts.
//
// Meta: name (the tool), arguments (the arguments object as in the Answer).
func (g *Generator) ToolCall() Example {
	t := tools[g.rng.IntN(len(tools))]
	fullName := func() string { return g.pick(g.pools.names) + " " + g.pick(g.pools.names) }
	// args holds the arguments in t.params order, as JSON values; clauses
	// state them in prose.
	var args []string
	var verb string
	var clauses []string
	str := func(v string) { args = append(args, strconv.Quote(v)) }
	num := func(v int) { args = append(args, strconv.Itoa(v)) }
	switch t.name {
	case "book_table":
		guest, city, day, people := fullName(), g.pick(g.pools.cities), 1+g.rng.IntN(28), 2+g.rng.IntN(11)
		str(guest)
		str(city)
		num(day)
		num(people)
		verb = "Please book a table"
		clauses = []string{"under the name " + guest, "in " + city, fmt.Sprintf("on day %d of the month", day), fmt.Sprintf("for %d people", people)}
	case "get_weather":
		city, days := g.pick(g.pools.cities), 1+g.rng.IntN(7)
		str(city)
		num(days)
		unit := "days"
		if days == 1 {
			unit = "day"
		}
		verb = "What will the weather be"
		clauses = []string{"in " + city, fmt.Sprintf("over the next %d %s", days, unit)}
	case "send_message":
		to := fullName()
		ws := make([]string, 2+g.rng.IntN(3))
		for i := range ws {
			ws[i] = g.pick(g.pools.topics)
		}
		text := strings.Join(ws, " ")
		str(to)
		str(text)
		verb = "Please send a message"
		clauses = []string{"to " + to, `with the text "` + text + `"`}
	case "add_contact":
		name, job, age := fullName(), g.pick(g.pools.jobs), 18+g.rng.IntN(70)
		str(name)
		str(job)
		num(age)
		verb = "Please add a contact"
		clauses = []string{"named " + name, "who works as " + article(job) + " " + job, fmt.Sprintf("aged %d", age)}
	default:
		panic("datasets: ToolCall: no request template for tool " + t.name) // tools and this switch disagree
	}
	g.rng.Shuffle(len(clauses), func(i, j int) { clauses[i], clauses[j] = clauses[j], clauses[i] })
	end := "."
	if strings.HasPrefix(verb, "What") {
		end = "?"
	}
	kv := make([]string, len(args))
	for i, a := range args {
		kv[i] = strconv.Quote(t.params[i].name) + ": " + a
	}
	arguments := "{" + strings.Join(kv, ", ") + "}"
	p := "You can call the tool below. Reply with the call as one line of JSON.\nTool: " + t.schema() +
		"\nUser: " + verb + " " + strings.Join(clauses, " ") + end + "\nCall: "
	a := fmt.Sprintf(`{"name": %q, "arguments": %s}`, t.name, arguments) + "\n"
	return Example{Task: TaskToolCall, Prompt: p, Answer: a, Meta: map[string]string{"name": t.name, "arguments": arguments}}
}

// Depths returns n relative depths evenly spaced over [0, 1]: 0, 1/(n-1),
// ..., 1, the linear depth grid of Needle-in-a-Haystack (n = 1 gives 0
// alone, n <= 0 none).
func Depths(n int) []float64 {
	if n <= 0 {
		return nil
	}
	ds := make([]float64, n)
	for i := range ds {
		ds[i] = float64(i) / float64(max(1, n-1))
	}
	return ds
}

// PasskeyGrid returns one Passkey example per (context, depth) cell, in
// row-major order (contexts outer): cell (i, j) is at i*len(depths)+j and
// is Passkey(contexts[i], depths[j]), drawn from g in that order. A
// context is the filler's size in bytes (one byte is one token for the
// probe's tokenizer), which Passkey rounds down to whole 90-byte filler
// paragraphs (Meta "filler_bytes"); the prompt adds about 190 bytes of
// instruction, needle and question. Meta adds "context" (contexts[i]) to
// Passkey's, whose "depth" is depths[j] with two decimals: distinct for up
// to 101 evenly spaced depths.
func (g *Generator) PasskeyGrid(contexts []int, depths []float64) []Example {
	out := make([]Example, 0, len(contexts)*len(depths))
	for _, c := range contexts {
		for _, d := range depths {
			e := g.Passkey(c, d)
			e.Meta["context"] = strconv.Itoa(c)
			out = append(out, e)
		}
	}
	return out
}
