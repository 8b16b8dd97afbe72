package safetensors

// File is the parsed header of a safetensors file.
//
// Tensor scans Tensors, so it sees changes a caller makes to the slice.
type File struct {
	// Metadata holds the "__metadata__" strings; nil when the header has
	// none (or has null).
	Metadata map[string]string
	// Tensors are sorted by Offset; tensors of zero bytes that share an
	// offset are sorted by name.
	Tensors []TensorInfo
	// DataOffset is the absolute offset of the data section, 8 plus the
	// header length.
	DataOffset int64
}

// TensorInfo describes one tensor and where its data is.
type TensorInfo struct {
	Name  string
	DType DType
	// Shape is in PyTorch order (the last dimension varies fastest); empty
	// for a scalar. Dimensions are non-negative and may be zero.
	Shape  []int64
	Offset int64 // absolute file offset of the data
	Size   int64 // bytes of data: the elements of Shape times the dtype's bits, over 8
}

// NumElements returns the product of t's dimensions (1 for a scalar). Parse
// has checked that it does not overflow.
func (t TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Tensor returns the info of the tensor with the given name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}
