package serve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/quant"
	"github.com/kvqlabs/kvq/pkg/runtime"
	"github.com/kvqlabs/kvq/pkg/runtime/modeltest"
	"github.com/kvqlabs/kvq/pkg/serve"
)

// A server over an engine with two caches; its handler mounted on a test
// server (Serve does the same on a listener, with a graceful shutdown).
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	modeltest.WriteHF(filepath.Join(dir, "tiny"), modeltest.Spec{DType: "F16", Seed: 4}, modeltest.HFOptions{})
	m, err := runtime.Load(context.Background(), filepath.Join(dir, "tiny"), runtime.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	caches, _ := quant.Formats().ParseList("fp16,int4")
	e, _ := engine.New(m, engine.Options{Caches: caches})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go e.Run(ctx)

	s, err := serve.New(e, serve.Options{Route: map[string]float64{"int4": 0.1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	fmt.Println(strings.Join(s.ModelIDs(), " "))
	for { // as a client would: wait until /health says the engine runs
		resp, err := srv.Client().Get(srv.URL + "/health")
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		time.Sleep(time.Millisecond)
	}
	resp, err := srv.Client().Post(srv.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"model": "tiny@int4", "prompt": "once upon a time", "max_tokens": 8, "ignore_eos": true}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var c struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
		Cache string `json:"kvq_cache"`
	}
	json.NewDecoder(resp.Body).Decode(&c)
	fmt.Println(resp.Status, resp.Header.Get(serve.CacheHeader), c.Cache, c.Usage.CompletionTokens)
	// Output:
	// tiny tiny@fp16 tiny@int4
	// 200 OK int4 int4 8
}
