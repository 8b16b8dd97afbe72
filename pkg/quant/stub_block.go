package quant

// blockFamilies lists the block formats. (Placeholder until they land.)
func blockFamilies() []family { return nil }
