package eval

import (
	"errors"
	"io"

	"github.com/kvqlabs/kvq/pkg/eval"
)

var errNotYet = errors.New("not built yet")

// WriteHTML writes the self-contained HTML report.
func WriteHTML(w io.Writer, rep *eval.Report) error { return errNotYet }

// WritePlots writes the report's plots into dir.
func WritePlots(dir string, rep *eval.Report) error { return errNotYet }
