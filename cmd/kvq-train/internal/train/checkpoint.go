package train

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
)

// CheckpointFile is the checkpoint's name inside a training directory.
const CheckpointFile = "checkpoint.bin"

const checkpointMagic = "KVQTRN01"

// state is everything a resumed run needs: the weights, the Adam moments
// and the number of steps done. The data stream needs no state: step s
// draws from a generator seeded by (Seed, s).
type state struct {
	model *Model
	m, v  []float32
	step  int
}

// Checkpoint layout (little-endian):
//
//	magic "KVQTRN01"
//	uint32 n, then n bytes of the Config as JSON
//	uint64 steps done
//	uint64 parameter count P
//	P float32 weights, P float32 first moments, P float32 second moments
//	uint32 CRC-32 (IEEE) of everything before it

// saveCheckpoint writes st to dir/checkpoint.bin atomically: to a
// temporary file in dir, synced, then renamed over the old one.
func saveCheckpoint(dir string, st *state) error {
	cfgJSON, err := json.Marshal(st.model.cfg)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, CheckpointFile+".tmp*")
	if err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	crc := crc32.NewIEEE()
	bw := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
	var hdr []byte
	hdr = append(hdr, checkpointMagic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(cfgJSON)))
	hdr = append(hdr, cfgJSON...)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(st.step))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(st.model.w)))
	bw.Write(hdr)
	for _, v := range [][]float32{st.model.w, st.m, st.v} {
		writeFloats(bw, v)
	}
	err = bw.Flush()
	if err == nil {
		_, err = f.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32()))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, CheckpointFile))
	}
	if err != nil {
		return fmt.Errorf("train: writing checkpoint in %s: %w", dir, err)
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename in dir durable where the platform allows it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

func writeFloats(w *bufio.Writer, v []float32) {
	var b [4]byte
	for _, x := range v {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		w.Write(b[:])
	}
}

// loadCheckpoint reads dir/checkpoint.bin. It returns (nil, nil) when
// there is none.
func loadCheckpoint(dir string) (*state, error) {
	path := filepath.Join(dir, CheckpointFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: "+format, append([]any{ErrCheckpoint, path}, args...)...)
	}
	if len(data) < len(checkpointMagic)+4+16+4 || string(data[:len(checkpointMagic)]) != checkpointMagic {
		return nil, bad("not a kvq training checkpoint")
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, bad("checksum mismatch (truncated or corrupt)")
	}
	r := bytes.NewReader(body[len(checkpointMagic):])
	var n uint32
	binary.Read(r, binary.LittleEndian, &n)
	if int64(n) > int64(r.Len()) {
		return nil, bad("config length %d exceeds the file", n)
	}
	cfgJSON := make([]byte, n)
	io.ReadFull(r, cfgJSON)
	var cfg Config
	if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
		return nil, bad("config: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	var step, count uint64
	binary.Read(r, binary.LittleEndian, &step)
	binary.Read(r, binary.LittleEndian, &count)
	lay := newLayout(&cfg)
	if count != uint64(lay.size) || int64(r.Len()) != 3*4*int64(count) {
		return nil, bad("%d parameters and %d bytes of data, config implies %d parameters", count, r.Len(), lay.size)
	}
	if step > uint64(cfg.Steps) {
		return nil, bad("%d steps done of %d", step, cfg.Steps)
	}
	rest := body[len(body)-r.Len():]
	read := func(i int) []float32 {
		v := make([]float32, count)
		b := rest[i*4*int(count):]
		for j := range v {
			v[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*j:]))
		}
		return v
	}
	return &state{model: &Model{cfg: cfg, lay: lay, w: read(0)}, m: read(1), v: read(2), step: int(step)}, nil
}

// Load returns the model of the checkpoint in dir (a training directory).
func Load(dir string) (*Model, error) {
	st, err := loadCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("%w: %s has no %s", ErrCheckpoint, dir, CheckpointFile)
	}
	return st.model, nil
}
