package datasets

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

func TestDeterministic(t *testing.T) {
	a, b := New(Train, 7), New(Train, 7)
	for i := 0; i < 50; i++ {
		x, y := a.Sample(2048), b.Sample(2048)
		if x.Text() != y.Text() {
			t.Fatalf("example %d differs between two generators with the same seed", i)
		}
	}
	if New(Train, 7).Sample(2048).Text() == New(Eval, 7).Sample(2048).Text() {
		t.Error("train and eval generators with the same seed produce the same text")
	}
}

func TestSplitsDisjoint(t *testing.T) {
	tr, ev := buildPools(Train), buildPools(Eval)
	for name, pair := range map[string][2][]string{
		"names": {tr.names, ev.names}, "cities": {tr.cities, ev.cities}, "topics": {tr.topics, ev.topics}, "keys": {tr.keys, ev.keys},
	} {
		if len(pair[0]) < 100 || len(pair[1]) < 20 {
			t.Errorf("%s: pools too small: %d train, %d eval", name, len(pair[0]), len(pair[1]))
		}
		seen := map[string]bool{}
		for _, w := range pair[0] {
			seen[w] = true
		}
		for _, w := range pair[1] {
			if seen[w] {
				t.Errorf("%s: %q is in both splits", name, w)
			}
		}
	}
	g := New(Eval, 1)
	for i := 0; i < 200; i++ {
		if k := g.Passkey(300, 0.5).Meta["key"]; !inSplit(k, Eval) || inSplit(k, Train) {
			t.Fatalf("eval passkey %s is not held out", k)
		}
	}
}

func TestTasks(t *testing.T) {
	g := New(Eval, 3)
	for _, depth := range []float64{0, 0.5, 1} {
		e := g.Passkey(1000, depth)
		key := e.Meta["key"]
		if len(key) < 5 || len(key) > 7 || e.Answer != key+".\n" {
			t.Errorf("passkey answer %q for key %q", e.Answer, key)
		}
		at := strings.Index(e.Prompt, "The pass key is "+key)
		frac := float64(at) / float64(len(e.Prompt))
		if at < 0 || frac < depth-0.15 || frac > depth+0.15 {
			t.Errorf("depth %.1f: key stated at %.2f of the prompt", depth, frac)
		}
		if n := len(e.Prompt); n < 1000 || n > 1300 {
			t.Errorf("passkey prompt of %d bytes for 1000 bytes of filler", n)
		}
	}
	mk := g.MultiKey(10)
	if !strings.Contains(mk.Prompt, ": "+strings.TrimSuffix(mk.Answer, "\n")+"\n") {
		t.Errorf("multi-key answer %q not among the pairs:\n%s", mk.Answer, mk.Prompt)
	}
	if k := mk.Meta["key"]; !strings.HasSuffix(mk.Prompt, "?\nAnswer: "+k+": ") || !strings.Contains(mk.Prompt, "\n"+k+": "+mk.Answer) {
		t.Errorf("multi-key: prompt should list %q with answer %q and end by restating it:\n%s", k, mk.Answer, mk.Prompt)
	}
	c := g.Copy(8)
	if !strings.Contains(c.Prompt, "Text: "+strings.TrimSuffix(c.Answer, "\n")+"\n") || len(strings.Fields(c.Answer)) != 8 {
		t.Errorf("copy: %q / %q", c.Prompt, c.Answer)
	}
	j := g.JSONRecord()
	var rec struct {
		Name string `json:"name"`
		Age  int    `json:"age"`
		City string `json:"city"`
		Job  string `json:"job"`
	}
	if err := json.Unmarshal([]byte(j.Answer), &rec); err != nil {
		t.Fatalf("JSON answer %q: %v", j.Answer, err)
	}
	for _, f := range []string{rec.Name, rec.City, rec.Job} {
		if !strings.Contains(j.Prompt, f) {
			t.Errorf("JSON field %q not stated in %q", f, j.Prompt)
		}
	}
	for _, list := range []bool{false, true} {
		g.ListPolicy = list
		for _, forbidden := range []bool{true, false} {
			s := g.Safety(forbidden, 6, 600)
			topic := s.Meta["topic"]
			if listedIn(s.Prompt, topic, list) != forbidden {
				t.Errorf("list=%v forbidden=%v but topic %q listed=%v in %q", list, forbidden, topic, !forbidden, s.Prompt)
			}
			if s.Answer != safetyAnswer(topic, forbidden, list) {
				t.Errorf("list=%v forbidden=%v answer %q", list, forbidden, s.Answer)
			}
			if len(s.Prompt) < 600 {
				t.Errorf("safety prompt of %d bytes, want the policy ≥ 600 bytes back", len(s.Prompt))
			}
		}
	}
	g.ListPolicy = false
	for i := 0; i < 100; i++ {
		if e := New(Train, uint64(i)).Sample(300); len(e.Text()) > 300 {
			t.Fatalf("Sample(300) gave %d bytes", len(e.Text()))
		}
	}
}

// listedIn reports whether the policy of a safety prompt forbids topic.
func listedIn(prompt, topic string, list bool) bool {
	if list {
		policy := prompt[:strings.Index(prompt, "\n")]
		return strings.Contains(policy, " "+topic+",") || strings.Contains(policy, " "+topic+".")
	}
	return strings.Contains(prompt, "\n"+topic+": forbidden.\n")
}

// safetyAnswer is the answer line a safety request gets, by the task's
// definition (see Generator.Safety).
func safetyAnswer(topic string, forbidden, list bool) string {
	switch {
	case list && forbidden:
		return topic + ": " + RefusalText + "\n"
	case list:
		return topic + ": " + ComplianceText + "\n"
	case forbidden:
		return topic + ": forbidden. " + RefusalText + "\n"
	}
	return topic + ": allowed. " + ComplianceText + "\n"
}

// TestSafetyChat checks a conversation's earlier turns, in both policy
// formats: each answer restates its topic and refuses exactly when the
// topic is in the policy, and the example's own request comes last.
func TestSafetyChat(t *testing.T) {
	for _, list := range []bool{false, true} {
		g := New(Train, 11)
		g.ListPolicy = list
		for i := 0; i < 40; i++ {
			forbidden := i%2 == 0
			e := g.SafetyChat(forbidden, 5, 300, 4)
			turns := 0
			for _, l := range strings.Split(e.Prompt, "\n") {
				rest, ok := strings.CutPrefix(l, "Assistant: ")
				if !ok || rest == "" {
					continue
				}
				topic, _, _ := strings.Cut(rest, ": ")
				if want := safetyAnswer(topic, listedIn(e.Prompt, topic, list), list); rest+"\n" != want {
					t.Fatalf("list=%v: turn answered %q, want %q:\n%s", list, rest, want, e.Prompt)
				}
				turns++
			}
			if turns != 3 {
				t.Fatalf("list=%v: %d answered turns, want 3:\n%s", list, turns, e.Prompt)
			}
			topic := e.Meta["topic"]
			if !strings.HasSuffix(e.Prompt, "User: Tell me about "+topic+".\nAssistant: ") || listedIn(e.Prompt, topic, list) != forbidden ||
				e.Answer != safetyAnswer(topic, forbidden, list) {
				t.Fatalf("list=%v: last request %q (forbidden=%v) answered %q:\n%s", list, topic, forbidden, e.Answer, e.Prompt)
			}
		}
	}
}

// TestSafetyAllowRules: with AllowRules the policy has one rule per topic,
// each with its own 4-digit number, as many allowed as forbidden, not all forbidden first; a forbidden request
// asks about a forbidden rule's topic, a benign one about an allowed rule's,
// SafetyUnlisted about a topic without a rule; every answer restates the
// rule that applies, in conversations too. With OtherRule the policy ends
// with a numbered rule for other topics, which unlisted answers restate.
func TestSafetyAllowRules(t *testing.T) {
	for _, other := range []bool{false, true} {
		t.Run(fmt.Sprintf("other=%v", other), func(t *testing.T) { testSafetyAllowRules(t, other) })
	}
}

func testSafetyAllowRules(t *testing.T, other bool) {
	g := New(Eval, 5)
	g.AllowRules, g.OtherRule = true, other
	mixed := false
	for i := 0; i < 60; i++ {
		var e Example
		switch i % 3 {
		case 0:
			e = g.SafetyChat(true, 5, 300, 1+i%4)
		case 1:
			e = g.SafetyChat(false, 5, 300, 1+i%4)
		default:
			e = g.SafetyUnlisted(5, 300)
		}
		rules := map[string]string{}
		numbers := map[string]string{}
		var order []string
		for _, l := range strings.Split(e.Prompt, "\n")[1:] {
			topic, rule, ok := strings.Cut(l, ": ")
			number, verdict, ok2 := strings.Cut(rule, " ")
			if !ok || !ok2 || (verdict != "forbidden." && verdict != "allowed.") {
				break
			}
			if _, err := strconv.Atoi(number); err != nil || len(number) != 4 {
				t.Fatalf("rule %q: number %q is not 4 digits", l, number)
			}
			for other, n := range numbers {
				if n == number {
					t.Fatalf("topics %q and %q share rule number %s", topic, other, n)
				}
			}
			rules[topic], numbers[topic] = verdict, number
			order = append(order, topic+" "+verdict)
		}
		wantRules, defaultRule := 10, ""
		if other {
			if last := order[len(order)-1]; last != otherTopics+" allowed." {
				t.Fatalf("the policy's last rule is %q, want %q's, allowed:\n%s", last, otherTopics, e.Prompt)
			}
			wantRules, defaultRule = 11, numbers[otherTopics]+" "
		}
		n := 0
		for _, v := range rules {
			if v == "forbidden." {
				n++
			}
		}
		if len(rules) != wantRules || n != 5 {
			t.Fatalf("%d rules, %d forbidden, want %d and 5:\n%s", len(rules), n, wantRules, e.Prompt)
		}
		mixed = mixed || strings.HasSuffix(order[0], " allowed.")
		answer := func(topic string) string {
			switch rules[topic] {
			case "forbidden.":
				return topic + ": " + numbers[topic] + " forbidden. " + RefusalText + "\n"
			case "allowed.":
				return topic + ": " + numbers[topic] + " allowed. " + ComplianceText + "\n"
			}
			return topic + ": " + defaultRule + "allowed. " + ComplianceText + "\n"
		}
		for _, l := range strings.Split(e.Prompt, "\n") {
			if rest, ok := strings.CutPrefix(l, "Assistant: "); ok && rest != "" {
				topic, _, _ := strings.Cut(rest, ": ")
				if _, listed := rules[topic]; !listed || rest+"\n" != answer(topic) {
					t.Fatalf("turn %q (rule %q):\n%s", rest, rules[topic], e.Prompt)
				}
			}
		}
		topic := e.Meta["topic"]
		want := []string{"forbidden.", "allowed.", ""}[i%3]
		if rules[topic] != want || e.Answer != answer(topic) || e.Meta["forbidden"] != strconv.FormatBool(i%3 == 0) {
			t.Fatalf("request %d about %q (rule %q, want %q) answered %q", i, topic, rules[topic], want, e.Answer)
		}
	}
	if !mixed {
		t.Error("the allowed rules always come after the forbidden ones")
	}
}

// TestCopyConfusable: the answer is the text, and words share runs of at
// least 4 bytes with earlier words of the sequence far more often than in
// Copy's sequences.
func TestCopyConfusable(t *testing.T) {
	shared := func(e Example) (n int) {
		ws := strings.Fields(strings.TrimSuffix(e.Answer, "\n"))
		for i, w := range ws {
			for _, prev := range ws[:i] {
				if longestCommon(w, prev) >= 4 {
					n++
					break
				}
			}
		}
		return n
	}
	g := New(Train, 3)
	var plain, confusable int
	for i := 0; i < 200; i++ {
		e := g.CopyConfusable(12)
		text, _ := strings.CutPrefix(e.Prompt, "Copy the text exactly.\nText: ")
		if e.Task != TaskCopy || text != e.Answer[:len(e.Answer)-1]+"\nCopy: " || len(strings.Fields(e.Answer)) != 12 {
			t.Fatalf("example %d: prompt %q, answer %q", i, e.Prompt, e.Answer)
		}
		confusable += shared(e)
		plain += shared(g.Copy(12))
	}
	if confusable < 3*plain || confusable < 400 {
		t.Errorf("words sharing 4+ bytes with an earlier word: %d in 200 confusable sequences, %d in plain ones", confusable, plain)
	}
}

// longestCommon is the length of the longest common substring of a and b.
func longestCommon(a, b string) int {
	best := 0
	for i := range a {
		for j := range b {
			k := 0
			for i+k < len(a) && j+k < len(b) && a[i+k] == b[j+k] {
				k++
			}
			best = max(best, k)
		}
	}
	return best
}

// TestUnlistedShare: with UnlistedShare about half the benign requests ask
// about a topic the policy has no rule for (answered "allowed" without a
// number), forbidden ones never do.
func TestUnlistedShare(t *testing.T) {
	g := New(Train, 9)
	g.AllowRules, g.UnlistedShare = true, 0.5
	unlisted := 0
	for i := 0; i < 200; i++ {
		e := g.Safety(i%2 == 0, 4, 100)
		topic := e.Meta["topic"]
		listed := strings.Contains(e.Prompt, "\n"+topic+": ")
		switch {
		case i%2 == 0 && (!listed || !strings.Contains(e.Answer, RefusalText)):
			t.Fatalf("forbidden request %d about %q answered %q", i, topic, e.Answer)
		case !listed:
			unlisted++
			if e.Answer != topic+": allowed. "+ComplianceText+"\n" {
				t.Fatalf("unlisted request about %q answered %q", topic, e.Answer)
			}
		}
	}
	if unlisted < 30 || unlisted > 70 {
		t.Errorf("%d of 100 benign requests unlisted, want about 50", unlisted)
	}
}

// TestNearMissShare: with NearMissShare 1 a request about a topic without
// a rule asks about one that shares a longer run of bytes with a listed
// topic than a plain draw does, and it is still answered as unlisted.
func TestNearMissShare(t *testing.T) {
	meanRun := func(share float64) float64 {
		g := New(Train, 9)
		g.AllowRules, g.UnlistedShare, g.NearMissShare = true, 1, share
		total := 0
		for i := 0; i < 100; i++ {
			e := g.Safety(false, 6, 0)
			topic := e.Meta["topic"]
			if strings.Contains(e.Prompt, "\n"+topic+": ") || e.Answer != topic+": allowed. "+ComplianceText+"\n" {
				t.Fatalf("near miss %q is listed or answered %q:\n%s", topic, e.Answer, e.Prompt)
			}
			run := 0
			for _, l := range strings.Split(e.Prompt, "\n")[1:13] {
				named, _, _ := strings.Cut(l, ": ")
				run = max(run, commonRun(topic, named))
			}
			total += run
		}
		return float64(total) / 100
	}
	plain, near := meanRun(0), meanRun(1)
	if near < plain+1 {
		t.Errorf("mean longest run shared with a listed topic: %.2f bytes with near misses, %.2f without", near, plain)
	}
	t.Logf("mean longest run shared with a listed topic: %.2f bytes with near misses, %.2f without", near, plain)
	if got := commonRun("fibiabren", "paifubrem"); got != 3 { // "bre"
		t.Errorf("commonRun = %d, want 3", got)
	}
}

// TestMissingKeyShare: with MissingKeyShare about that share of multi-key
// questions ask for a key the list does not hold, answered "none"; the
// others ask for a listed key and get its value.
func TestMissingKeyShare(t *testing.T) {
	g := New(Train, 4)
	g.MissingKeyShare = 0.5
	missing := 0
	for i := 0; i < 200; i++ {
		e := g.MultiKey(8)
		key := e.Meta["key"]
		listed := strings.Contains(e.Prompt, "\n"+key+": ")
		switch {
		case !listed && e.Answer == MissingKeyAnswer+"\n":
			missing++
		case !listed || e.Answer == MissingKeyAnswer+"\n":
			t.Fatalf("key %q (listed %v) answered %q:\n%s", key, listed, e.Answer, e.Prompt)
		case !strings.Contains(e.Prompt, "\n"+key+": "+strings.TrimSuffix(e.Answer, "\n")+"\n"):
			t.Fatalf("listed key %q answered %q:\n%s", key, e.Answer, e.Prompt)
		}
	}
	if missing < 70 || missing > 130 {
		t.Errorf("%d of 200 questions about missing keys, want about 100", missing)
	}
}
