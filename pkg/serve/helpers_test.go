package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/serve"
)

var (
	modelOnce sync.Once
	modelDir  string
	modelErr  error
)

// tinyDir writes the tiny test model once per test binary: llama, F16
// weights (so responses do not depend on the batch), a byte-level BPE
// tokenizer and a chat template, context 512.
func tinyDir(t *testing.T) string {
	t.Helper()
	modelOnce.Do(func() {
		modelDir, modelErr = os.MkdirTemp("", "kvq-serve-test-")
		if modelErr == nil {
			modelDir = filepath.Join(modelDir, "tiny")
			modelErr = modeltest.WriteHF(modelDir, modeltest.Spec{Arch: "llama", DType: "F16", Seed: 4, Context: 512}, modeltest.HFOptions{})
		}
	})
	if modelErr != nil {
		t.Fatal(modelErr)
	}
	return modelDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if modelDir != "" {
		os.RemoveAll(filepath.Dir(modelDir))
	}
	os.Exit(code)
}

func loadModel(t *testing.T) *runtime.Model {
	t.Helper()
	m, err := runtime.Load(context.Background(), tinyDir(t), runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func specs(t *testing.T, names ...string) []quant.Spec {
	t.Helper()
	var out []quant.Spec
	for _, n := range names {
		s, err := quant.Formats().ParseSpec(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// fixture is an engine and a server on a loopback port.
type fixture struct {
	e      *engine.Engine
	s      *serve.Server
	url    string
	client *http.Client
	stop   context.CancelFunc // ends Serve
	served chan error         // Serve's result
}

// startEngine runs an engine until the test ends.
func startEngine(t *testing.T, m *runtime.Model, eo engine.Options) *engine.Engine {
	t.Helper()
	if eo.Caches == nil {
		eo.Caches = specs(t, "fp16", "int8")
	}
	e, err := engine.New(m, eo)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	if err := e.WaitReady(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// start serves e on a free loopback port until the test ends.
func start(t *testing.T, e *engine.Engine, so serve.Options) *fixture {
	t.Helper()
	if so.ModelName == "" {
		so.ModelName = "tiny"
	}
	s, err := serve.New(e, so)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &fixture{e: e, s: s, url: "http://" + ln.Addr().String(), stop: cancel, served: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}}
	go func() { f.served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-f.served:
		case <-time.After(15 * time.Second):
			t.Error("Serve did not return")
		}
		f.client.CloseIdleConnections()
	})
	return f
}

// newServer is an engine (fp16 and int8 caches) and its server.
func newServer(t *testing.T, so serve.Options) *fixture {
	t.Helper()
	return start(t, startEngine(t, loadModel(t), engine.Options{Chunk: 32}), so)
}

// post sends body (a value to encode, or a string sent as is) and returns
// the status, the headers and the body.
func (f *fixture) post(t *testing.T, path string, body any, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, f.url+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

func (f *fixture) get(t *testing.T, path string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := f.client.Get(f.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out
}

// completion is the part of a response the tests read.
type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Created int64  `json:"created"`
	Choices []struct {
		Index   int     `json:"index"`
		Text    *string `json:"text"`
		Message *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
		StopReason   *string         `json:"stop_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	Cache string          `json:"kvq_cache"`
	Error json.RawMessage `json:"error"`
}

func decode(t *testing.T, b []byte) completion {
	t.Helper()
	var c completion
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return c
}

// text is a choice's text, message content or delta content.
func (c completion) text() string {
	if len(c.Choices) == 0 {
		return ""
	}
	ch := c.Choices[0]
	switch {
	case ch.Text != nil:
		return *ch.Text
	case ch.Message != nil:
		return ch.Message.Content
	case ch.Delta != nil && ch.Delta.Content != nil:
		return *ch.Delta.Content
	}
	return ""
}

func (c completion) finish() string {
	if len(c.Choices) == 0 || c.Choices[0].FinishReason == nil {
		return ""
	}
	return *c.Choices[0].FinishReason
}

// sse reads a stream's events exactly: every event must be "data: ...\n\n"
// and the last "data: [DONE]".
func sse(t *testing.T, body []byte) []completion {
	t.Helper()
	if !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("stream does not end with data: [DONE]: %q", tail(body))
	}
	var out []completion
	for _, ev := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		if data == "[DONE]" {
			break
		}
		out = append(out, decode(t, []byte(data)))
	}
	return out
}

func tail(b []byte) []byte {
	if len(b) > 200 {
		return b[len(b)-200:]
	}
	return b
}

// apiErr is an error response's body.
type apiErr struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// waitIdle waits for the engine's pools to drain: nothing running or
// waiting, no KV bytes in use.
func waitIdle(t *testing.T, e *engine.Engine) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		idle := true
		for _, p := range e.Stats() {
			idle = idle && p.Running == 0 && p.Waiting == 0 && p.UsedBytes == 0
		}
		if idle {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Errorf("pools not idle: %+v", e.Stats())
}

// streamReader reads a response's events one at a time.
type streamReader struct {
	r *bufio.Reader
}

func (s *streamReader) next() (string, error) {
	var b strings.Builder
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", err
		}
		if line == "\n" {
			return strings.TrimPrefix(b.String(), "data: "), nil
		}
		b.WriteString(strings.TrimSuffix(line, "\n"))
	}
}
