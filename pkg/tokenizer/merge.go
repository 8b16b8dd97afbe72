package tokenizer

// The merge engine shared by both BPE flavours: the text is a doubly linked
// list of symbols (contiguous byte spans), and a binary heap holds candidate
// merges of adjacent symbols ordered by priority. Popping the best candidate,
// skipping candidates made stale by earlier merges, and pushing the two new
// neighbour pairs of each merge gives O(n log n) for n initial symbols.

// symbol is a span of the text being merged.
type symbol struct {
	start, end int32 // byte span; end < 0 once merged into its left neighbour
	prev, next int32 // neighbours, -1 at the ends
	id         int32 // token of the span, -1 if none (SentencePiece unknown character)
}

// bigram is a candidate merge of symbols left and right.
type bigram struct {
	key         float32 // lower merges first: -score or rank
	left, right int32
	end         int32 // right's end when the candidate was made
	id          int32 // token of the merged span
}

// bigramHeap is a binary min-heap ordered by key, then by left position, so
// that ties go to the leftmost pair.
type bigramHeap []bigram

func (h bigramHeap) less(i, j int) bool {
	return h[i].key < h[j].key || (h[i].key == h[j].key && h[i].left < h[j].left)
}

func (h *bigramHeap) push(b bigram) {
	*h = append(*h, b)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *bigramHeap) pop() bigram {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	s.down(0)
	*h = s
	return top
}

func (h bigramHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func (h bigramHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// merger holds the reusable buffers of one Encode call.
type merger struct {
	syms []symbol
	heap bigramHeap
}

// run merges until no candidate is left. pair(l, r) returns the candidate for
// adjacent symbols l and r, if their concatenation is a token; the heap must
// already hold the candidates of all initially adjacent pairs.
func (m *merger) run(pair func(l, r int32) (bigram, bool)) {
	syms := m.syms
	m.heap.init()
	for len(m.heap) > 0 {
		b := m.heap.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.end < 0 || l.next != b.right || r.end != b.end {
			continue // stale: one side was merged since
		}
		l.end, l.next, l.id = r.end, r.next, b.id
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		r.end = -1
		if l.prev >= 0 {
			if nb, ok := pair(l.prev, b.left); ok {
				m.heap.push(nb)
			}
		}
		if l.next >= 0 {
			if nb, ok := pair(b.left, l.next); ok {
				m.heap.push(nb)
			}
		}
	}
}
