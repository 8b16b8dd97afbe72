package quant

// rotatedFamilies lists the rotated formats. (Placeholder until they land.)
func rotatedFamilies() []family { return nil }
