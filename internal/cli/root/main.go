package root

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kvqlabs/kvq/internal/cli/cmdutil"
)

// Main runs kvq with args on the process's streams and returns the exit code.
func Main(args []string, version string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, &cmdutil.Factory{IO: cmdutil.System(), Version: version}, args)
}

// Run executes the command tree and maps its error to an exit code, printing
// the error once on the factory's error stream.
func Run(ctx context.Context, f *cmdutil.Factory, args []string) int {
	cmd := NewCmd(f)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return cmdutil.ExitOK
	}
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		fmt.Fprintln(f.IO.ErrOut, "kvq: cancelled")
		return cmdutil.ExitCancelled
	case errors.As(err, new(*cmdutil.GateError)):
		fmt.Fprintf(f.IO.ErrOut, "kvq: %v\n", err)
		return cmdutil.ExitGate
	case isUsage(err):
		fmt.Fprintf(f.IO.ErrOut, "kvq: %v\nRun 'kvq --help' for usage.\n", err)
		return cmdutil.ExitUsage
	default:
		fmt.Fprintf(f.IO.ErrOut, "kvq: %v\n", err)
		return cmdutil.ExitError
	}
}

// isUsage reports usage errors: FlagError, and cobra's own argument and
// command errors, which cobra returns as plain errors.
func isUsage(err error) bool {
	var fe *cmdutil.FlagError
	if errors.As(err, &fe) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag", "accepts ", "invalid argument", "flag needs an argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
