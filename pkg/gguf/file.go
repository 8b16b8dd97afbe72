package gguf

// File is the parsed header, metadata and tensor infos of a GGUF file.
//
// The typed look-ups (String, Uint, Int, Float, Bool, Strings, Float32s,
// Int32s) fail with an error that names the key and wraps ErrKeyNotFound,
// ErrWrongType or ErrOutOfRange. Get, Tensor and the look-ups scan the
// slices, so they see changes a caller makes to KV and Tensors.
type File struct {
	Version    uint32       // 2 or 3
	Alignment  int64        // general.alignment, or DefaultAlignment (32)
	KV         []KV         // metadata in file order
	Tensors    []TensorInfo // tensor infos in file order
	DataOffset int64        // absolute offset of the tensor data section
}

// KV is one metadata key/value pair.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor and where its data is.
type TensorInfo struct {
	Name string
	// Dims are in ggml order: Dims[0] (ne[0]) varies fastest and is the row
	// length. A tensor has at most four dimensions, none of them zero; no
	// dimensions at all means a scalar.
	Dims   []uint64
	Type   Type
	Offset int64 // absolute file offset of the data, a multiple of the alignment from DataOffset
	Size   int64 // bytes of data
}

// NumElements returns the product of t's dimensions.
func (t TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// Get returns the value of a metadata key.
func (f *File) Get(key string) (Value, bool) {
	for _, kv := range f.KV {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return Value{}, false
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

// lookup returns key's value converted by conv, with errors naming the key.
func lookup[T any](f *File, key string, conv func(Value) (T, error)) (T, error) {
	v, ok := f.Get(key)
	if !ok {
		var zero T
		return zero, newError(ErrKeyNotFound, "%q", key)
	}
	x, err := conv(v)
	if err != nil {
		de := asDetail(err)
		return x, newError(de.sentinel, "key %q %s", key, de.msg)
	}
	return x, nil
}

// String returns a string value.
func (f *File) String(key string) (string, error) {
	return lookup(f, key, func(v Value) (string, error) {
		if s, ok := v.v.(string); ok {
			return s, nil
		}
		return "", newError(ErrWrongType, "is %s, want string", v.describe())
	})
}

// Uint returns an integer value of any integer type; negative values fail
// with ErrOutOfRange.
func (f *File) Uint(key string) (uint64, error) { return lookup(f, key, Value.toUint) }

// Int returns an integer value of any integer type; uint64 values above
// math.MaxInt64 fail with ErrOutOfRange.
func (f *File) Int(key string) (int64, error) { return lookup(f, key, Value.toInt) }

// Float returns a float32 or float64 value, or an integer value converted to
// float64.
func (f *File) Float(key string) (float64, error) { return lookup(f, key, Value.toFloat) }

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, error) {
	return lookup(f, key, func(v Value) (bool, error) {
		if b, ok := v.v.(bool); ok {
			return b, nil
		}
		return false, newError(ErrWrongType, "is %s, want bool", v.describe())
	})
}

// Strings returns a copy of an array of strings.
func (f *File) Strings(key string) ([]string, error) {
	return lookup(f, key, func(v Value) ([]string, error) {
		if s, ok := v.v.([]string); ok {
			return append([]string(nil), s...), nil
		}
		return nil, newError(ErrWrongType, "is %s, want array of string", v.describe())
	})
}

// Float32s returns a copy of an array of float32, or of float64 converted to
// float32.
func (f *File) Float32s(key string) ([]float32, error) {
	return lookup(f, key, func(v Value) ([]float32, error) {
		switch s := v.v.(type) {
		case []float32:
			return append([]float32(nil), s...), nil
		case []float64:
			out := make([]float32, len(s))
			for i, x := range s {
				out[i] = float32(x)
			}
			return out, nil
		}
		return nil, newError(ErrWrongType, "is %s, want array of float32", v.describe())
	})
}

// Int32s returns a copy of an array of int32, or of another integer type
// converted to int32; elements that do not fit fail with ErrOutOfRange.
func (f *File) Int32s(key string) ([]int32, error) { return lookup(f, key, Value.toInt32s) }
