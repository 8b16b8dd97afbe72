package runtime

// SharedSteps is the number of steps whose entries shared the embedding
// and the first layer's work before its attention (AsAlone).
func (r *Runner) SharedSteps() int { return r.shared }
