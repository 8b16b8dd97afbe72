package quant

import "fmt"

// Info summarizes a format for a head size: what kvq formats prints.
type Info struct {
	Name    string   `json:"name"`
	Summary string   `json:"summary"`
	Needs   []string `json:"needs"`
	// Bytes per token per KV head (data + metadata), for K, for V, and
	// their mean; fp16 residual windows are not included (see
	// WindowTokens).
	KBytes float64 `json:"k_bytes_per_token_per_head"`
	VBytes float64 `json:"v_bytes_per_token_per_head"`
	Bytes  float64 `json:"bytes_per_token_per_head"`
	// Effective bits per cached value.
	KBits float64 `json:"k_bits_per_value"`
	VBits float64 `json:"v_bits_per_value"`
	Bits  float64 `json:"bits_per_value"`
	// WindowTokens is the number of most recent tokens the format itself
	// keeps in fp16 (per sequence, layer and head), or tokens that wait in
	// fp16 until a group is complete (TokenGroup − 1).
	WindowTokens int `json:"fp16_window_tokens"`
	// Error is set when the format cannot serve this head size.
	Error string `json:"error,omitempty"`
}

// Describe returns Info for every preset at head size dim.
func (r *Registry) Describe(dim int) []Info {
	var out []Info
	for _, name := range r.Names() {
		f, err := r.Lookup(name)
		if err != nil {
			out = append(out, Info{Name: name, Error: err.Error()})
			continue
		}
		out = append(out, DescribeFormat(f, dim))
	}
	return out
}

// DescribeFormat returns Info for one format at head size dim.
func DescribeFormat(f Format, dim int) Info {
	in := Info{Name: f.Name()}
	if d, ok := f.(Describer); ok {
		in.Summary, in.Needs = d.Describe()
	}
	if in.Needs == nil {
		in.Needs = []string{}
	}
	if dim <= 0 || dim > MaxHeadDim {
		in.Error = fmt.Sprintf("%v: %d (valid: 1 to %d)", ErrDim, dim, MaxHeadDim)
		return in
	}
	for _, key := range []bool{true, false} {
		c, err := f.NewCodec(CodecParams{Dim: dim, Key: key})
		if err != nil {
			in.Error = err.Error()
			return in
		}
		rows := c.TokenGroup()
		per := float64(c.TileBytes(rows)) / float64(rows)
		win := rows - 1
		if w, ok := c.(Windowed); ok {
			win = max(win, w.ResidualRows())
		}
		in.WindowTokens = max(in.WindowTokens, win)
		if key {
			in.KBytes = per
		} else {
			in.VBytes = per
		}
	}
	in.Bytes = (in.KBytes + in.VBytes) / 2
	in.KBits = in.KBytes * 8 / float64(dim)
	in.VBits = in.VBytes * 8 / float64(dim)
	in.Bits = in.Bytes * 8 / float64(dim)
	return in
}
