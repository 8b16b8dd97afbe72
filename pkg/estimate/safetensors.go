package estimate

import (
	"fmt"
	"io"
	"os"

	"github.com/kvqlabs/kvq/pkg/safetensors"
)

// safetensorsInfo is what a safetensors header says about the weights.
type safetensorsInfo struct {
	params int64 // elements over all tensors
	bytes  int64 // data bytes over all tensors
}

func readSafetensorsFile(path string) (safetensorsInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return safetensorsInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return safetensorsInfo{}, err
	}
	info, err := readSafetensors(f, st.Size())
	if err != nil {
		return safetensorsInfo{}, fmt.Errorf("%s: %w", path, err)
	}
	return info, nil
}

// readSafetensors sums the elements and data bytes of the tensors in the
// safetensors file r (of size bytes) holds, reading only its header.
func readSafetensors(r io.ReaderAt, size int64) (safetensorsInfo, error) {
	f, err := safetensors.Parse(r, size)
	if err != nil {
		return safetensorsInfo{}, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	var info safetensorsInfo
	for _, t := range f.Tensors {
		if info.params, err = add(info.params, t.NumElements()); err == nil {
			info.bytes, err = add(info.bytes, t.Size)
		}
		if err != nil {
			return safetensorsInfo{}, err
		}
	}
	return info, nil
}
