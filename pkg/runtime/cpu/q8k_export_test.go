package cpu

// MatMulF32Activations runs f with the decode products of q4_K, q5_K and
// q6_K weights on fp32 activations (fusedDots), as before Q8_K activations
// (q8Activations), for tests that show the difference.
func MatMulF32Activations(f func()) {
	q8Activations = false
	defer func() { q8Activations = true }()
	f()
}
