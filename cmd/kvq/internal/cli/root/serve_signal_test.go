package root

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
)

// TestServeSecondSignal runs kvq serve as a process with a long grace and
// a request in flight (a 20K-token prompt and 40K tokens to generate, minutes):
// after SIGINT, /health answers 503 over HTTP while the request finishes;
// a second signal (SIGTERM) ends the process within a second instead of
// waiting for the request or the grace.
func TestServeSecondSignal(t *testing.T) {
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
	args, err := json.Marshal([]string{"serve", "--model", model, "--port", "0", "--shutdown-grace", "5m"})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalChild$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(args))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	var mu sync.Mutex
	var log strings.Builder
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`listening on (http://[^\s,]+)`)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	logged := func() string { mu.Lock(); defer mu.Unlock(); return log.String() }
	var url string
	select {
	case url = <-addr:
	case <-time.After(time.Minute):
		t.Fatalf("kvq serve did not start: %q", logged())
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	body, _ := json.Marshal(map[string]any{"prompt": strings.Repeat("the cat sat on the mat. ", 1200), "max_tokens": 40000, "ignore_eos": true})
	go func() {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Logf("POST: %v", err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("POST: %d %.200s", resp.StatusCode, b)
	}()
	if err := waitCPU(cmd.Process.Pid, 700*time.Millisecond, exited); err != nil {
		t.Fatalf("%v (stderr %q)", err, logged())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(url + "/health")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if code = resp.StatusCode; code == http.StatusServiceUnavailable {
			break
		}
	}
	if code != http.StatusServiceUnavailable {
		t.Errorf("GET /health after SIGINT, a request in flight: %d, want 503", code)
	}
	select {
	case err := <-exited:
		t.Fatalf("kvq serve exited (%v) with a request in flight and 5m of grace (stderr %q)", err, logged())
	default:
	}
	t0 := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("kvq serve still running a minute after a second signal (stderr %q)", logged())
	}
	if stop := time.Since(t0); stop > time.Second {
		t.Errorf("kvq serve exited %v after the second signal, want under a second", stop)
	}
	if c := cmd.ProcessState.ExitCode(); c != 0 && c != 130 {
		t.Errorf("exit %d after two signals (stderr %q)", c, logged())
	}
	if !strings.Contains(logged(), "second signal") {
		t.Errorf("stderr %q: want the second signal noted", logged())
	}
}
