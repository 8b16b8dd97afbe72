package datasets

import (
	"math/rand/v2"
	"strings"
)

// The words and prose of RULER's tasks, written for kvq: English
// adjectives and nouns for needle keys (RULER pairs wonderwords'
// adjectives and nouns the same way), those and some verbs for common-word
// extraction, and the essay haystack.

var rulerAdjectives = strings.Fields(`able active ancient angry bitter bold brave bright broad calm careful cheap clean clever
cold common cool curious damp dark deep dry eager early easy empty even fair famous fast fierce fine flat fresh
gentle giant glad golden good grand great green happy hard heavy hidden high hollow honest huge humble idle jolly
keen kind large late lazy light little lively long loud lucky mad mellow mighty modern narrow neat noble odd old
pale patient plain polite poor proud quick quiet rapid rare rich rough round royal rural sharp short shy silent
silver simple slow small smooth soft solid sour spare steady steep stiff strange strict strong sudden sweet swift
tall tame thick thin tidy tiny tough true vast warm weak wet wide wild wise young`)

var rulerNouns = strings.Fields(`acorn anchor apple arrow badge basket beacon bell bench blanket boat bottle bridge
brush bucket button cabin candle canoe canyon carpet castle cellar chair chimney clock cloud coat comet
cottage crayon crown curtain desert diamond dragon drum eagle engine feather fence field flag flute forest fountain
garden gate glove hammer harbor helmet hill island jacket jewel kettle kite ladder lamp lantern leaf lemon letter
lighthouse lion map marble meadow mirror moon mountain needle nest ocean orchard owl paddle palace parrot pebble
pencil piano pillow planet pocket pond puzzle quilt rabbit rainbow river robot rocket saddle sail scarf shadow shell
ship shovel signal spoon stamp star statue stone storm sugar table teapot tent thunder ticket tiger tower
train trumpet tulip tunnel turtle umbrella valley violin wagon wallet whistle window wizard`)

var rulerVerbs = strings.Fields(`accept admire argue arrive borrow breathe build carry change climb collect cook cover
dance decide deliver describe discover divide dream drive earn enjoy explain explore fold follow gather guess hang
harvest hurry imagine invent jump knock laugh learn listen measure mend notice offer open paint pause plant polish
pour prefer promise pull push question reach remember repair rescue return sail scatter search shout sing sketch
sleep smile sort spill start stir study swim taste teach travel trust visit wander wash whisper wonder write`)

// rulerWords are common-word extraction's words: the adjectives, nouns
// and verbs, in a fixed order.
var rulerWords = func() []string {
	seen := map[string]bool{}
	var out []string
	for _, ws := range [][]string{rulerNouns, rulerAdjectives, rulerVerbs} {
		for _, w := range ws {
			if !seen[w] {
				seen[w] = true
				out = append(out, w)
			}
		}
	}
	return out
}()

// essayFrames are the essay's sentences, with slots: {a} an adjective,
// {n} and {m} nouns, {v} a verb.
var essayFrames = []string{
	"Most of what we learn about a {n} we learn by trying to {v} it, not by reading about it.",
	"People who {v} for a living rarely describe the work the way outsiders imagine it.",
	"The first version of anything is usually {a}, and that is not a reason to stop.",
	"A {a} {n} can teach more than a shelf of manuals, if you pay attention to why it fails.",
	"It took me years to notice that the hard part was never the {n} but the {m} around it.",
	"When a town builds a new {n}, the people who use it decide what it is really for.",
	"There is a kind of patience that only comes from having to {v} the same thing many times.",
	"Good tools disappear in the hand, and bad ones make you think about the {n} instead of the work.",
	"If you ask ten people what makes a {n} {a}, you will hear ten different answers and one shared feeling.",
	"The best advice I ever got was to {v} early and to {v} often.",
	"Every workshop has a corner where the {a} {n}s end up, waiting for a use nobody has found yet.",
	"Why do we trust a {n} more once we have seen it break and be repaired?",
	"Nobody sets out to make a {a} {n}; it happens one small compromise at a time.",
	"The river does not argue with the {n}, it simply goes around it and keeps its course.",
	"A map of the valley shows the roads, but not which of them the farmers actually take.",
	"Some problems look {a} from far away and turn out to be three small problems standing close together.",
	"What matters in a {n} is not how it looks on the first day but how it ages.",
	"I have come to think that curiosity is mostly the habit of asking one more question.",
	"In the old market, the {n} sellers knew their customers by the way they walked.",
	"You can tell a lot about a place from what its people bother to {v}.",
	"The difference between a hobby and a craft is whether you keep going when it stops being fun.",
	"Each season the orchard asks for a different kind of work, and the trees do not wait.",
	"It is easy to admire a {a} {n} and much harder to build one.",
	"Teachers often say that you understand a thing only once you can {v} it to someone else.",
	"A quiet room, a {a} lamp and an unfinished {n} are enough to fill an evening.",
	"Plans are useful mostly because making them forces you to look at the {n} closely.",
	"Cities grow the way coral does, one small decision resting on another.",
	"The engineers kept a notebook of every {n} that failed, and it became their most valuable book.",
	"Sometimes the {a} answer is the right one, and the clever one is a detour.",
	"When the storm passed, the village counted its {n}s and started to {v} what it could.",
	"Learning to {v} well is mostly learning what not to do.",
	"There are two kinds of {n}: the ones people talk about and the ones people use.",
	"A good question is worth more than a {a} answer to the wrong one.",
	"The lighthouse keeper wrote that the sea was never the same color two days in a row.",
	"Children {v} without worrying whether they are doing it correctly, and they learn fast.",
	"Most progress is invisible while it happens and obvious afterwards.",
	"The {n} on the hill was built by people who never saw it finished.",
	"If something is worth doing, it is worth doing badly at first.",
	"Every trade has its words, and learning them is the first step to thinking like its people.",
	"An afternoon spent trying to {v} a {n} is rarely wasted, even when nothing works.",
}

// RulerEssay returns the first n words of kvq's essay haystack: an
// endless, fixed stream of prose (the same for every seed, as RULER's
// essay text is fixed), so that RulerEssay(n) is a prefix of RulerEssay(m)
// for n < m. The words are joined by single spaces and every sentence
// ends with ".", "?" or "!".
func RulerEssay(n int) string {
	r := rand.New(rand.NewPCG(0x65737361, 0x79))
	pick := func(ws []string) string { return ws[r.IntN(len(ws))] }
	out := make([]string, 0, n)
	for len(out) < n {
		s := essayFrames[r.IntN(len(essayFrames))]
		var b []byte
		for {
			i := strings.IndexByte(s, '{')
			if i < 0 {
				b = append(b, s...)
				break
			}
			b = append(b, s[:i]...)
			var w string
			switch s[i+1] {
			case 'a':
				w = pick(rulerAdjectives)
			case 'v':
				w = pick(rulerVerbs)
			default:
				w = pick(rulerNouns)
			}
			// "a" before a vowel is "an".
			if n := len(b); n >= 2 && (b[n-2] == 'a' || b[n-2] == 'A') && (n == 2 || b[n-3] == ' ') && strings.ContainsRune("aeiou", rune(w[0])) {
				b = append(b[:n-1], 'n', ' ')
			}
			b = append(b, w...)
			s = s[i+3:]
		}
		for _, w := range strings.Fields(string(b)) {
			if len(out) == n {
				break
			}
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

// essaySentences splits text into sentences after words ending in ".",
// "?" or "!" (the essay has no abbreviations); a last unfinished sentence
// is kept.
func essaySentences(text string) []string {
	var out, cur []string
	for _, w := range strings.Fields(text) {
		cur = append(cur, w)
		if strings.HasSuffix(w, ".") || strings.HasSuffix(w, "?") || strings.HasSuffix(w, "!") {
			out = append(out, strings.Join(cur, " "))
			cur = nil
		}
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, " "))
	}
	return out
}
