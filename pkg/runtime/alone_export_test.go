package runtime

// SharedSteps is the number of steps whose entries shared the embedding
// and the first layer's work before its attention (AsAlone).
func (r *Runner) SharedSteps() int { return r.shared }

// WholeSteps is the number of those steps that shared every layer.
func (r *Runner) WholeSteps() int { return r.whole }
