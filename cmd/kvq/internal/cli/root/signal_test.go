package root

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// childArgsEnv holds, as JSON, the kvq arguments TestSignalChild runs.
const childArgsEnv = "KVQ_TEST_SIGNAL_CHILD"

// TestSignalChild is not a test on its own: TestSignals runs this test
// binary again with childArgsEnv set, and this runs kvq's Main as the
// binary would, with its signal-aware context, and exits with its code.
func TestSignalChild(t *testing.T) {
	env := os.Getenv(childArgsEnv)
	if env == "" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(env), &args); err != nil {
		t.Fatal(err)
	}
	os.Exit(Main(args, "test"))
}

// TestSignals sends SIGINT and SIGTERM to kvq generate in the middle of a
// long prefill (about 30K prompt tokens on a random 2-layer model, seconds
// per layer on 2 cores) and checks that it exits with code 130, having
// printed nothing, within a second of the signal: the forward pass stops
// inside a layer, not at its end.
func TestSignals(t *testing.T) {
	if goruntime.GOOS == "windows" {
		t.Skip("no SIGINT to send to a child process on Windows")
	}
	if testing.Short() {
		t.Skip("runs a long prefill")
	}
	model := filepath.Join(t.TempDir(), "long.gguf")
	if err := modeltest.WriteGGUF(model, modeltest.Spec{Dim: 128, Hidden: 384, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 64, Context: 65536, Seed: 9}); err != nil {
		t.Fatal(err)
	}
	args, err := json.Marshal([]string{"generate", "--model", model, "--prompt", strings.Repeat("the cat sat on the mat. ", 1500), "-n", "1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			// Two tries: one slow stop on a loaded machine is noise, two
			// are a finding.
			var stops []time.Duration
			for range 2 {
				stop := signalDuringPrefill(t, sig, string(args))
				if stop < time.Second {
					return
				}
				stops = append(stops, stop)
			}
			t.Errorf("kvq generate stopped %v after %v (twice over a second)", stops, sig)
		})
	}
}

// signalDuringPrefill starts kvq with args (JSON), waits until it has
// computed for a while (it is then in the prefill: loading and tokenizing
// take milliseconds), sends sig, and returns how long it took to exit after
// the signal, having checked its exit code and output.
func signalDuringPrefill(t *testing.T, sig syscall.Signal, args string) time.Duration {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalChild$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	if err := waitCPU(cmd.Process.Pid, 500*time.Millisecond, exited); err != nil {
		t.Fatalf("%v (stderr %q)", err, stderr.String())
	}
	t0 := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("kvq generate still running 2 minutes after %v", sig)
	}
	stop := time.Since(t0)
	code := cmd.ProcessState.ExitCode()
	if code != 130 || !strings.Contains(stderr.String(), "cancelled") {
		t.Fatalf("after %v: exit %d (%v), stderr %q; want exit 130, cancelled", sig, code, err, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("after %v in the prefill, stdout %q; want nothing", sig, stdout.String())
	}
	t.Logf("%v: exit 130, %v after the signal", sig, stop.Round(time.Millisecond))
	return stop
}

// waitCPU waits until process pid has used cpu of CPU time (read from
// /proc; where there is none, it waits 2 s of wall time), or fails if it
// exits first or takes over a minute.
func waitCPU(pid int, cpu time.Duration, exited <-chan error) error {
	deadline := time.Now().Add(time.Minute)
	start := time.Now()
	for {
		select {
		case err := <-exited:
			return &childError{"kvq generate exited before the signal", err}
		default:
		}
		used, ok := processCPU(pid)
		if !ok && time.Since(start) > 2*time.Second || ok && used >= cpu {
			return nil
		}
		if time.Now().After(deadline) {
			return &childError{"kvq generate used under " + cpu.String() + " of CPU in a minute", nil}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type childError struct {
	msg string
	err error
}

func (e *childError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

// processCPU is the user plus system time of process pid, from
// /proc/PID/stat (clock ticks of 1/100 s, USER_HZ on Linux).
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}
