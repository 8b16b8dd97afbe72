package root

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
)

// Main runs kvq with args on the process's streams and returns the exit code.
func Main(args []string, version string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, &cmdutil.Factory{IO: cmdutil.System(), Version: version}, args)
}

// Run executes the command tree and maps its error to an exit code, printing
// the error once on the factory's error stream. One policy holds for every
// command (cmdutil.ExitCodesHelp): 2 for a bad flag or argument and for a
// missing or malformed input file, 3 for a check that ran and failed, 130
// for an interruption, 1 for anything else.
func Run(ctx context.Context, f *cmdutil.Factory, args []string) int {
	cmd := NewCmd(f)
	cmd.SetArgs(args)
	c, err := cmd.ExecuteContextC(ctx)
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
	case errors.As(err, new(*cmdutil.HoldError)):
		fmt.Fprintf(f.IO.ErrOut, "kvq: %v\n", err)
		return cmdutil.ExitHold
	case cmdutil.IsFlagError(err):
		// The hint names the command that refused the flag or argument.
		path := "kvq"
		if c != nil {
			path = c.CommandPath()
		}
		fmt.Fprintf(f.IO.ErrOut, "kvq: %s\nRun '%s --help' for usage.\n", oneLine(err.Error()), path)
		return cmdutil.ExitUsage
	case cmdutil.IsInputError(err):
		fmt.Fprintf(f.IO.ErrOut, "kvq: %v\n", err)
		return cmdutil.ExitUsage
	default:
		fmt.Fprintf(f.IO.ErrOut, "kvq: %v\n", err)
		return cmdutil.ExitError
	}
}
