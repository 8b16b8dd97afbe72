package cmdutil

import (
	"errors"

	"github.com/kvqlabs/kvq/pkg/kvqerr"
)

// IsInputError reports an error caused by an input file or option the user
// gave: an error of the libraries' input kind (kvqerr.IsInput), which
// their parsers, loaders and option checks return for a malformed,
// truncated or unsupported model, tokenizer, config or data file or a
// refused option, and which UsageError marks. Whichever command meets
// one, it exits with code 2.
func IsInputError(err error) bool { return kvqerr.IsInput(err) }

func asFlag(err error, fe **FlagError) bool { return errors.As(err, fe) }
