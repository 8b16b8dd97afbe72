package quant

// kvquantFamilies lists the kvquant formats. (Placeholder until they land.)
func kvquantFamilies() []family { return nil }
