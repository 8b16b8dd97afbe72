//go:build cuda || cudaemu

package gpu

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/kvqlabs/kvq/pkg/runtime/backend"
	kvqtensor "github.com/kvqlabs/kvq/pkg/tensor"
)

// matrix is an uploaded weight (kernels/dense.cu describes the layouts):
// F32 as float32 and F16/BF16 as their 16-bit values, rows of ld values
// zero padded to a 16-byte multiple; Q8_0 as int8 codes [rows][cols] in p
// and the fp16 scales [rows][cols/32] in sc, so that a warp reads 512
// contiguous code bytes of a row in one load instead of 34-byte blocks
// that straddle 16-byte boundaries; the other GGML block types (Q4_0 ..
// MXFP4) as the file's blocks unchanged, ld bytes per row
// (kernels/blockq.cuh decodes them).
type matrix struct {
	name       string
	dt         kvqtensor.DType
	rows, cols int
	ld         int    // values per stored row (Q8_0: cols; other block types: bytes)
	p, sc      devptr // values or codes; Q8_0 scales (else 0)
	// lazy is an MXFP4 weight not yet on the device (p is 0): the first
	// product by it uploads its blocks, so an expert never routed to costs
	// no device memory. Its Raw bytes (the model's memory map or
	// repacked copy) must outlive the matrix.
	lazy *kvqtensor.Weight
}

var _ backend.Matrix = (*matrix)(nil)

// Dims implements backend.Matrix.
func (m *matrix) Dims() (rows, cols int) { return m.rows, m.cols }

// mat returns m's device matrix; m must come from a GPU backend.
func mat(m backend.Matrix) *matrix { return m.(*matrix) }

// kernelSuffix names m's dtype in kernel names.
func (m *matrix) kernelSuffix() string { return dtypeSuffix[m.dt] }

// dtypeSuffix names each weight dtype in kernel names.
var dtypeSuffix = [...]string{
	kvqtensor.F32: "f32", kvqtensor.F16: "f16", kvqtensor.BF16: "bf16", kvqtensor.Q80: "q80",
	kvqtensor.Q40: "q40", kvqtensor.Q41: "q41", kvqtensor.Q50: "q50", kvqtensor.Q51: "q51",
	kvqtensor.Q2K: "q2k", kvqtensor.Q3K: "q3k", kvqtensor.Q4K: "q4k", kvqtensor.Q5K: "q5k", kvqtensor.Q6K: "q6k",
	kvqtensor.IQ4NL: "iq4nl", kvqtensor.IQ4XS: "iq4xs", kvqtensor.MXFP4: "mxfp4",
}

// blockType reports whether dt is one of the GGML block types stored
// packed on the device (Q4_0 .. MXFP4; Q8_0 has its own split layout).
func blockType(dt kvqtensor.DType) bool { return dt.Packed() && dt != kvqtensor.Q80 }

// gemvKernel[dt][n] is the GEMV kernel for n activation rows (a table, so
// that a decode step formats no names).
var gemvKernel = func() (k [len(dtypeSuffix)][gemvMaxNT + 1]string) {
	for dt, s := range dtypeSuffix {
		for n := 1; n <= gemvMaxNT; n++ {
			k[dt][n] = fmt.Sprintf("kvq_gemv_%s_%d", s, n)
		}
	}
	return k
}()

// roundUp rounds n up to a multiple of m.
func roundUp(n, m int) int { return (n + m - 1) / m * m }

// Upload implements backend.Backend: the weight is copied to the device
// in the matrix layout (see matrix); the host copy is not kept. An MXFP4
// weight is the exception: it stays on the host (w.Raw, kept referenced)
// until its first product, which puts its blocks on the device.
func (b *Backend) Upload(w *kvqtensor.Weight) (backend.Matrix, error) {
	if supportsWeight(w.DType) != nil {
		return nil, fmt.Errorf("%w: gpu: weight %s of dtype %v", backend.ErrUnsupported, w.Name, w.DType)
	}
	if err := w.Validate(); err != nil {
		return nil, err
	}
	m := &matrix{name: w.Name, dt: w.DType, rows: w.Rows, cols: w.Cols}
	var err error
	switch w.DType {
	case kvqtensor.MXFP4:
		m.lazy = w
		return m, nil
	case kvqtensor.F32:
		m.ld = roundUp(w.Cols, 4)
		m.p, err = b.uploadRows(unsafe.Pointer(&w.F32[0]), w.Rows, 4*w.Cols, 4*m.ld)
	case kvqtensor.F16, kvqtensor.BF16:
		m.ld = roundUp(w.Cols, 8)
		m.p, err = b.uploadRows(unsafe.Pointer(&w.U16[0]), w.Rows, 2*w.Cols, 2*m.ld)
	case kvqtensor.Q80:
		m.ld = w.Cols
		err = b.uploadQ80(m, w.Raw)
	default: // a block type: the blocks as they are
		m.ld = w.DType.RowBytes(w.Cols)
		m.p, err = b.uploadRows(unsafe.Pointer(&w.Raw[0]), w.Rows, m.ld, m.ld)
	}
	if err != nil {
		return nil, fmt.Errorf("gpu: uploading %s [%d %d] %v (%d bytes): %w", w.Name, w.Rows, w.Cols, w.DType, w.Bytes(), err)
	}
	return m, nil
}

// supportsWeight reports whether Upload takes weights of dtype dt (the
// Registration's answer too): F32, F16, BF16 and every GGML block type
// pkg/tensor names.
func supportsWeight(dt kvqtensor.DType) error {
	if dt >= 0 && int(dt) < len(dtypeSuffix) && dtypeSuffix[dt] != "" {
		return nil
	}
	return fmt.Errorf("%w: gpu: weight dtype %v", backend.ErrUnsupported, dt)
}

// uploadRows copies rows of rowBytes at src to a new device buffer of
// rows of stride bytes (≥ rowBytes), zero padded.
func (b *Backend) uploadRows(src unsafe.Pointer, rows, rowBytes, stride int) (devptr, error) {
	size := int64(rows) * int64(stride)
	p, err := b.d.alloc(size)
	if err != nil {
		return 0, err
	}
	if stride == rowBytes {
		err = b.d.htod(p, src, size)
	} else {
		buf := make([]byte, size)
		in := unsafe.Slice((*byte)(src), rows*rowBytes)
		for r := 0; r < rows; r++ {
			copy(buf[r*stride:], in[r*rowBytes:(r+1)*rowBytes])
		}
		err = b.d.htod(p, unsafe.Pointer(&buf[0]), size)
	}
	if err != nil {
		b.d.free(p)
		return 0, err
	}
	return p, nil
}

// uploadQ80 splits Q8_0 blocks into m's code and scale buffers.
func (b *Backend) uploadQ80(m *matrix, raw []byte) error {
	nb := m.rows * m.cols / kvqtensor.Q80BlockSize
	codes := make([]byte, m.rows*m.cols)
	scales := make([]uint16, nb)
	for i := 0; i < nb; i++ {
		blk := raw[i*kvqtensor.Q80BlockBytes : (i+1)*kvqtensor.Q80BlockBytes]
		scales[i] = binary.LittleEndian.Uint16(blk)
		copy(codes[i*kvqtensor.Q80BlockSize:], blk[2:])
	}
	p, err := b.d.alloc(int64(len(codes)))
	if err != nil {
		return err
	}
	sc, err := b.d.alloc(int64(2 * len(scales)))
	if err != nil {
		b.d.free(p)
		return err
	}
	if err = b.d.htod(p, unsafe.Pointer(&codes[0]), int64(len(codes))); err == nil {
		err = b.d.htod(sc, unsafe.Pointer(&scales[0]), int64(2*len(scales)))
	}
	if err != nil {
		b.d.free(p)
		b.d.free(sc)
		return err
	}
	m.p, m.sc = p, sc
	return nil
}

// gemvMaxNT is the most activation rows the GEMV kernels take in one
// launch (kvq_gemv_*_1 .. _8).
const gemvMaxNT = 8

// Launch shapes (kernels/*.cu).
const (
	gemvRows    = 4   // weight rows per GEMV block
	bgemvRows   = 8   // weight rows per block-type GEMV block (a warp each)
	gemvThreads = 256 // threads per GEMV block
	gemmBN      = 128 // weight rows per GEMM tile
	sgemmTile   = 64  // tile side of the fp32 GEMM
	refThreads  = 128 // threads per block of the reference kernel
)

// MatMul implements backend.Backend: up to gemmMinNT-1 activation rows
// run the GEMV kernels (each weight row read once for up to 8 activation
// rows), more the tiled GEMMs (tensor cores for F16, BF16, Q8_0 and the
// other block types, whose weights are decoded to fp16 tile by tile; fp32
// for F32). It panics if dst or x are too small.
func (b *Backend) MatMul(dst, x backend.Tensor, nt int, w backend.Matrix) {
	m := mat(w)
	d, xt := dev(dst), dev(x)
	if nt < 0 || d.n < nt*m.rows || xt.n < nt*m.cols {
		panic(fmt.Sprintf("gpu: MatMul of %d rows by %s [%d %d] into %d values from %d", nt, m.name, m.rows, m.cols, d.n, xt.n))
	}
	if nt == 0 {
		return
	}
	if m.lazy != nil {
		if err := b.materialize(m); err != nil {
			b.fail(err)
			return
		}
	}
	if nt < b.dense.gemmMinNT {
		b.gemv(d, xt, nt, m)
		return
	}
	b.gemm(d, xt, nt, m)
}

// xvec reports whether every activation row from x starts 16-byte aligned
// (the float4 loads of the fast kernels).
func xvec(x devptr, cols int) int {
	if cols%4 == 0 && x%16 == 0 {
		return 1
	}
	return 0
}

// gemv runs the GEMV kernels over nt activation rows, gemvMaxNT at a time.
func (b *Backend) gemv(dst, x *tensor, nt int, m *matrix) {
	for t0 := 0; t0 < nt; t0 += gemvMaxNT {
		n := min(gemvMaxNT, nt-t0)
		xs := x.at(t0 * m.cols)
		rowsPer := gemvRows
		if blockType(m.dt) {
			rowsPer = bgemvRows
		}
		b.launch(gemvKernel[m.dt][n],
			dim3{blocks(m.rows, rowsPer), 1, 1}, dim3{gemvThreads, 1, 1}, 0,
			args{}.ptr(dst.at(t0*m.rows)).ptr(xs).ptr(m.p).ptr(m.sc).
				int(m.rows).int(m.cols).int(m.ld).int(xvec(xs, m.cols)))
	}
}

// gemm runs the tiled GEMM for nt activation rows.
func (b *Backend) gemm(dst, x *tensor, nt int, m *matrix) {
	if m.dt == kvqtensor.F32 {
		b.launch("kvq_sgemm_f32",
			dim3{blocks(m.rows, sgemmTile), blocks(nt, sgemmTile), 1}, dim3{256, 1, 1}, 0,
			args{}.ptr(dst.p).ptr(x.p).ptr(m.p).int(nt).int(m.rows).int(m.cols).int(m.ld))
		return
	}
	// 64-row tiles when 128 would leave most of a tile's activation rows
	// empty or give too few blocks to fill the device.
	bm := 128
	if nt <= 64 || int(blocks(m.rows, gemmBN))*int(blocks(nt, 128)) < 2*b.smCount() {
		bm = 64
	}
	if t := b.dense.gemmTile; t != 0 {
		bm = t
	}
	name := "kvq_gemm_" + m.kernelSuffix() + "_128"
	if bm == 64 {
		name = "kvq_gemm_" + m.kernelSuffix() + "_64"
	}
	b.launch(name,
		dim3{blocks(m.rows, gemmBN), blocks(nt, bm), 1}, dim3{256, 1, 1}, 0,
		args{}.ptr(dst.p).ptr(x.p).ptr(m.p).ptr(m.sc).
			int(nt).int(m.rows).int(m.cols).int(m.ld).int(xvec(x.p, m.cols)))
}

// smCount is the device's number of SMs (at least 1).
func (b *Backend) smCount() int { return max(1, b.d.info().SMs) }

// matMulRef is MatMul by the reference kernel (one thread per output, a
// sequential fp32 sum): the tests' device-side oracle for the fast paths.
func (b *Backend) matMulRef(dst, x backend.Tensor, nt int, w backend.Matrix) {
	m := mat(w)
	d, xt := dev(dst), dev(x)
	if nt < 0 || d.n < nt*m.rows || xt.n < nt*m.cols {
		panic(fmt.Sprintf("gpu: matMulRef of %d rows by %s [%d %d] into %d values from %d", nt, m.name, m.rows, m.cols, d.n, xt.n))
	}
	if m.lazy != nil {
		if err := b.materialize(m); err != nil {
			b.fail(err)
			return
		}
	}
	for t0 := 0; t0 < nt; t0 += maxGridY {
		n := min(maxGridY, nt-t0)
		b.launch("kvq_matmul_ref_"+m.kernelSuffix(),
			dim3{blocks(m.rows, refThreads), uint32(n), 1}, dim3{refThreads, 1, 1}, 0,
			args{}.ptr(d.at(t0*m.rows)).ptr(xt.at(t0*m.cols)).ptr(m.p).ptr(m.sc).int(m.rows).int(m.cols).int(m.ld))
	}
}

// materialize uploads a lazy MXFP4 matrix (see matrix.lazy): its blocks
// as they are, multiplied packed like every block type.
func (b *Backend) materialize(m *matrix) error {
	w := m.lazy
	m.ld = w.DType.RowBytes(w.Cols)
	p, err := b.uploadRows(unsafe.Pointer(&w.Raw[0]), w.Rows, m.ld, m.ld)
	if err != nil {
		return fmt.Errorf("gpu: uploading %s [%d %d] MXFP4: %w", m.name, w.Rows, w.Cols, err)
	}
	m.p, m.lazy = p, nil
	return nil
}
