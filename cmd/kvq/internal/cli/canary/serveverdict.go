package canary

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/cmdutil"
	"github.com/kvqlabs/kvq/pkg/canary"
	"github.com/spf13/cobra"
)

func newServeVerdictCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{IO: f.IO, Output: "table"}
	cmd := &cobra.Command{
		Use:   "serve-verdict --listen ADDR --baseline URL --candidate URL",
		Short: "Watch a canary and serve its verdict over HTTP (Argo Rollouts, Flagger)",
		Long: `kvq canary serve-verdict runs kvq canary watch's judgement (continuously by
default) and serves the latest window's verdict:

  GET /verdict          the kvq.canary/v1 report as JSON; an Argo Rollouts web
                        metric reads jsonPath "{$.result.verdict}" with
                        successCondition result == "promote"
  GET /flagger          200 unless the verdict is rollback, then 503 (a Flagger
                        rollout webhook: non-2xx is a failed check)
  GET /flagger/promote  200 only on promote (a confirm-promotion webhook)
  GET /metrics          kvq_canary_verdict{verdict}, kvq_canary_actions_total,
                        kvq_canary_windows_total, kvq_canary_gate_failed{metric}

Each window is also printed on stderr as one line. With a bounded --duration
the final verdict is served until the command is interrupted.

` + gatesHelp + `

Exit codes: 0 stopped (SIGTERM or Ctrl-C), 1 runtime failure (the address is
taken, a server cannot be scraped at the start), 2 usage error.`,
		Example: `  kvq canary serve-verdict --listen :9090 --baseline http://vllm-a:8000 \
    --candidate http://vllm-b:8000   # your own servers`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Listen == "" {
				return cmdutil.FlagErrorf("--listen ADDR is required (e.g. :9090)")
			}
			if err := o.Validate(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return o.RunServe(cmd.Context())
		},
	}
	addFlags(cmd, o, 0)
	cmd.Flags().StringVar(&o.Listen, "listen", "", "address to serve the verdict on, HOST:PORT (port 0: a free one, printed)")
	cmd.MarkFlagRequired("listen")
	return cmd
}

// RunServe serves the verdict while the watch runs.
func (o *Options) RunServe(ctx context.Context) error {
	wo := o.watchOptions()
	if err := o.checkAct(ctx, wo.HTTP); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", o.Listen, err)
	}
	vs := canary.NewVerdictServer()
	srv := &http.Server{Handler: vs, ReadHeaderTimeout: canary.ReadHeaderTimeout}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(o.IO.ErrOut, "kvq canary: verdict on http://%s/verdict (Flagger: /flagger, metrics: /metrics)\n", ln.Addr())
	v := newView(o.IO, false)
	v.out = o.IO.ErrOut
	v.tty = false
	_, werr := canary.Watch(ctx, wo, func(r *canary.Report) {
		vs.Update(r)
		v.window(r)
	})
	if werr != nil && !errors.Is(werr, context.Canceled) {
		srv.Close()
		return werr
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
