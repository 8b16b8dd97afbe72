//go:build !amd64 || !gc || purego

package simd

func dotQ40(w []byte, x []float32) float32 { return dotQ40Generic(w, x) }

func dotQ41(w []byte, x, xs []float32) float32 { return dotQ41Generic(w, x, xs) }

func dotQ50(w []byte, x []float32) float32 { return dotQ50Generic(w, x) }

func dotQ51(w []byte, x, xs []float32) float32 { return dotQ51Generic(w, x, xs) }

func dotIQ4NL(w []byte, x []float32) float32 { return dotIQ4NLGeneric(w, x) }

func dotMXFP4(w []byte, x []float32) float32 { return dotMXFP4Generic(w, x) }

func dotIQ4XS(w []byte, x []float32) float32 { return dotIQ4XSGeneric(w, x) }

func q23KBlocks(dst []float32, w []byte, three bool) { q23KBlocksGeneric(dst, w, three) }
