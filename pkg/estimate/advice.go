package estimate

import "fmt"

// advise decides Fits and, when something does not fit, says what to change.
// It needs the capacity figures and the grid.
func (fr *FormatResult) advise() {
	p := fr.plan
	fits := true
	one, err := fr.Cell(p.MaxModelLen, 1)
	switch {
	case err != nil:
		fits = false
		fr.Advice = append(fr.Advice, fmt.Sprintf("one request of max_model_len %d does not fit: %v", p.MaxModelLen, err))
	case fr.budget <= 0:
		fits = false
		fr.Advice = append(fr.Advice, "the weights and reserves leave no memory for the KV cache: use more GPUs (tensor or pipeline parallel), a larger GPU or a higher gpu_memory_utilization")
	case !*one.Fits:
		fits = false
		fr.Advice = append(fr.Advice, fmt.Sprintf(
			"one request of max_model_len %d needs %s per rank but the KV budget is %s (the engine would refuse to start): lower max_model_len to %d or less, or use a smaller cache format or more GPUs",
			p.MaxModelLen, FormatBytes(one.KVBytes), FormatBytes(fr.budget), *fr.MaxContext))
	}
	tooLong := map[int64]bool{p.MaxModelLen: one.Fits != nil && !*one.Fits}
	for _, c := range fr.Grid {
		if c.Fits == nil || *c.Fits || fr.budget <= 0 {
			continue
		}
		fits = false
		perReq := (c.KVBytes - c.StateBytes) / c.Concurrency
		most := int64(0)
		if perReq > 0 && fr.budget > c.StateBytes {
			most = (fr.budget - c.StateBytes) / perReq
		}
		switch {
		case most > 0:
			fr.Advice = append(fr.Advice, fmt.Sprintf("%d requests of %d tokens need %s per rank, more than the KV budget %s: at most %d fit",
				c.Concurrency, c.Context, FormatBytes(c.KVBytes), FormatBytes(fr.budget), most))
		case !tooLong[c.Context]:
			tooLong[c.Context] = true
			fr.Advice = append(fr.Advice, fmt.Sprintf("one request of %d tokens needs %s per rank, more than the KV budget %s: the longest that fits is %d tokens",
				c.Context, FormatBytes(perReq+c.StateBytes), FormatBytes(fr.budget), *fr.MaxContext))
		}
	}
	fr.Fits = &fits
}
