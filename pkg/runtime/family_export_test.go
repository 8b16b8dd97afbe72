package runtime

// LlamaFamily returns a copy of the Llama family's definition.
func LlamaFamily() Family { return llamaFamily }

// AddFamily registers f until the returned function is called (tests that
// call it must not run in parallel).
func AddFamily(f *Family) (restore func()) {
	old := families
	families = append(families[:len(families):len(families)], f)
	return func() { families = old }
}
