package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvqlabs/kvq/pkg/engine"
	"github.com/kvqlabs/kvq/pkg/runtime"
)

// Defaults of Options.
const (
	DefaultMaxBodyBytes  = 8 << 20
	DefaultMaxWaiting    = 1024
	DefaultShutdownGrace = 10 * time.Second
	// ReadHeaderTimeout and IdleTimeout are Serve's http.Server limits. It
	// sets no WriteTimeout: a stream lasts as long as its generation.
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 120 * time.Second
)

// Options configure a Server.
type Options struct {
	// ModelName is the served model name, the id clients send; default the
	// base name of the model's path (a file's without its extension).
	ModelName string
	// Route splits the requests for plain ModelName between caches for a
	// canary: each cache listed gets that share of them (0..1; the shares
	// sum to at most 1), the first cache the rest. Empty: all go to the
	// first cache. NAME@CACHE requests are never split.
	Route map[string]float64
	// Routes are routes restricted to some requests (a tenant's header,
	// an API key, a model id), or not; see Route for how a request's
	// cache is drawn. Route's entries follow them, without a match, in
	// the engine's cache order. Each group's shares sum to at most 1; a
	// cache and a match appear once.
	Routes []Route
	// OnRouteChange is called for each route a POST /admin/route changes
	// (kvq serve prints it); nil logs it to Logger at Info level.
	OnRouteChange func(RouteChange)
	// Fault injects latency and errors, for canary drills and tests.
	Fault Fault
	// RouteSeed makes the split reproducible: the k-th routed request's
	// draw is the first output of a PCG seeded with (RouteSeed, k).
	RouteSeed uint64
	// APIKey, when set, is required as "Authorization: Bearer KEY" on
	// /v1/ paths (compared in constant time, never logged).
	APIKey string
	// MaxBodyBytes bounds a request body (413 above); default 8 MiB.
	MaxBodyBytes int64
	// MaxWaiting refuses a request (429) when its cache's waiting queue,
	// as of the engine's last step, holds this many; default 1024, < 0 no
	// limit. A burst can pass this check between two steps: give the
	// engine the same engine.Options.MaxWaiting, which the engine decides
	// atomically with the queueing (kvq serve does).
	MaxWaiting int
	// ShutdownGrace is how long Serve lets in-flight requests finish after
	// its context ends before cancelling them; default 10 s.
	ShutdownGrace time.Duration
	// Logger receives recovered handler panics and the HTTP server's own
	// errors; nil discards them. Requests are not logged.
	Logger *slog.Logger
}

// Server serves an engine's caches over OpenAI's API. Create it with New.
type Server struct {
	e      *engine.Engine
	m      *runtime.Model
	opts   Options
	name   string
	caches []string
	rmu    sync.RWMutex // guards routes, which /admin/route changes
	routes []Route
	// aliasIDs and tenantKeys come from the routes' matches, which do
	// not change after New.
	aliasIDs   []string
	tenantKeys []string
	routeN     atomic.Uint64
	faultN     atomic.Uint64
	metrics    *metrics
	log        *slog.Logger
	created    int64
	idBase     string
	idN        atomic.Uint64

	draining   atomic.Bool
	active     atomic.Int64
	base       context.Context // requests' parent in Serve
	cancelBase context.CancelFunc
	served     atomic.Bool
	force      chan struct{} // closed by Close
	forceOnce  sync.Once

	testHook func(*http.Request) // tests: runs first in every request
}

// New returns a server over e, which the caller runs (engine.Engine.Run).
// It fails with ErrOptions for a route to a cache e lacks or shares that
// are negative or sum over 1.
func New(e *engine.Engine, opts Options) (*Server, error) {
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxWaiting == 0 {
		opts.MaxWaiting = DefaultMaxWaiting
	}
	if opts.ShutdownGrace == 0 {
		opts.ShutdownGrace = DefaultShutdownGrace
	}
	switch {
	case opts.MaxBodyBytes < 0:
		return nil, fmt.Errorf("%w: max body bytes %d", ErrOptions, opts.MaxBodyBytes)
	case opts.ShutdownGrace < 0:
		return nil, fmt.Errorf("%w: shutdown grace %v", ErrOptions, opts.ShutdownGrace)
	}
	m := e.Model()
	name := opts.ModelName
	if name == "" {
		name = DefaultModelName(m.Path)
	}
	if strings.Contains(name, "@") {
		return nil, fmt.Errorf("%w: model name %q: '@' separates the name from a cache", ErrOptions, name)
	}
	s := &Server{e: e, m: m, opts: opts, name: name, caches: e.Caches(), created: time.Now().Unix(), log: opts.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var sum float64
	for c, p := range opts.Route {
		if !slices.Contains(s.caches, c) {
			return nil, fmt.Errorf("%w: route to cache %q, which the engine lacks (it has %s)", ErrOptions, c, strings.Join(s.caches, ", "))
		}
		if !(p >= 0 && p <= 1) {
			return nil, fmt.Errorf("%w: route share %v for cache %s: must be in [0, 1]", ErrOptions, p, c)
		}
		sum += p
	}
	if sum > 1+1e-9 {
		return nil, fmt.Errorf("%w: route shares sum to %v, over 1", ErrOptions, sum)
	}
	if err := s.setRoutes(opts); err != nil {
		return nil, err
	}
	if err := opts.Fault.check(s.caches); err != nil {
		return nil, err
	}
	s.metrics = newMetrics(name, s.caches)
	var b [6]byte
	_, _ = rand.Read(b[:])
	s.idBase = hex.EncodeToString(b[:])
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.force = make(chan struct{})
	return s, nil
}

// setRoutes checks opts.Routes and sets the server's routes: them, then
// opts.Route's in the engine's cache order.
func (s *Server) setRoutes(opts Options) error {
	type key struct {
		cache string
		m     Match
	}
	seen := map[key]bool{}
	for _, rt := range opts.Routes {
		switch {
		case !slices.Contains(s.caches, rt.Cache):
			return fmt.Errorf("%w: route to cache %q, which the engine lacks (it has %s)", ErrOptions, rt.Cache, strings.Join(s.caches, ", "))
		case !(rt.Share >= 0 && rt.Share <= 1):
			return fmt.Errorf("%w: route share %v for cache %s: must be in [0, 1]", ErrOptions, rt.Share, rt.Cache)
		case seen[key{rt.Cache, rt.Match}]:
			return fmt.Errorf("%w: route to cache %s matching %q given twice", ErrOptions, rt.Cache, rt.Match)
		}
		if err := rt.Match.check(); err != nil {
			return fmt.Errorf("%w: route to cache %s: %v", ErrOptions, rt.Cache, err)
		}
		seen[key{rt.Cache, rt.Match}] = true
		s.routes = append(s.routes, rt)
	}
	for _, c := range s.caches { // the engine's order, so the split does not depend on map order
		if p, ok := opts.Route[c]; ok {
			if seen[key{c, Match{}}] {
				return fmt.Errorf("%w: route to cache %s given in both Route and Routes", ErrOptions, c)
			}
			s.routes = append(s.routes, Route{Cache: c, Share: p})
		}
	}
	if m, sum, over := overGroup(s.routes); over {
		return fmt.Errorf("%w: route shares for %q sum to %v, over 1", ErrOptions, m, sum)
	}
	s.setMatches()
	return nil
}

// DefaultModelName is the served name of a model at path: its base name,
// without a file's .gguf or .bin extension.
func DefaultModelName(path string) string {
	base := filepath.Base(filepath.Clean(path))
	for _, ext := range []string{".gguf", ".bin"} {
		if b, ok := strings.CutSuffix(base, ext); ok && b != "" {
			return b
		}
	}
	if base == "." || base == string(filepath.Separator) || base == "" {
		return "model"
	}
	return base
}

// ModelIDs returns the ids GET /v1/models lists: the name, NAME@CACHE
// for each cache, then the routes' model aliases.
func (s *Server) ModelIDs() []string {
	ids := []string{s.name}
	for _, c := range s.caches {
		ids = append(ids, s.name+"@"+c)
	}
	return append(ids, s.aliases()...)
}

// Handler returns the server's HTTP handler (with panic recovery). Serve
// uses it; tests and embedders may mount it elsewhere.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &responseWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("serve: handler panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
				if !rw.wrote {
					s.fail(rw, &apiError{status: http.StatusInternalServerError, message: "internal error", typ: typeServer, code: "internal_error"})
				}
			}
		}()
		s.dispatch(rw, r)
	})
}

// responseWriter records whether the response has started.
type responseWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *responseWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's Flush.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// dispatch routes a request by path, then method.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	if s.testHook != nil {
		s.testHook(r)
	}
	path := r.URL.Path
	if strings.HasPrefix(path, "/v1/") && !s.authorized(r) && !s.tenantKey(r) {
		s.fail(w, &apiError{status: http.StatusUnauthorized, message: "missing or incorrect API key: send it as 'Authorization: Bearer KEY'", typ: typeAuth, code: "invalid_api_key"})
		return
	}
	method := func(allowed ...string) bool {
		if slices.Contains(allowed, r.Method) {
			return true
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		s.fail(w, &apiError{status: http.StatusMethodNotAllowed, message: fmt.Sprintf("method %s not allowed on %s (use %s)", r.Method, path, strings.Join(allowed, " or ")), typ: typeInvalid, code: "method_not_allowed"})
		return false
	}
	switch {
	case path == "/health":
		if method(http.MethodGet, http.MethodHead) {
			s.health(w)
		}
	case path == "/metrics":
		if method(http.MethodGet, http.MethodHead) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			_ = s.metrics.write(w, s.e.Stats(), s.Routes())
		}
	case path == AdminRoutePath:
		s.adminRoute(w, r)
	case path == "/v1/models":
		if method(http.MethodGet) {
			s.writeJSON(w, http.StatusOK, s.modelList())
		}
	case strings.HasPrefix(path, "/v1/models/"):
		if method(http.MethodGet) {
			id := strings.TrimPrefix(path, "/v1/models/")
			for _, m := range s.modelList().Data {
				if m.ID == id {
					s.writeJSON(w, http.StatusOK, m)
					return
				}
			}
			s.fail(w, s.unknownModel(id))
		}
	case path == "/v1/completions":
		if method(http.MethodPost) {
			s.api(w, r, s.completions)
		}
	case path == "/v1/chat/completions":
		if method(http.MethodPost) {
			s.api(w, r, s.chatCompletions)
		}
	default:
		s.fail(w, &apiError{status: http.StatusNotFound, message: fmt.Sprintf("no endpoint %s %s (this server has /v1/completions, /v1/chat/completions, /v1/models, /health, /metrics, /admin/route)", r.Method, path), typ: typeInvalid, code: "not_found"})
	}
}

func (s *Server) authorized(r *http.Request) bool {
	return s.opts.APIKey == "" || s.adminAuthorized(r)
}

func (s *Server) health(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	switch {
	case s.draining.Load():
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "shutting down\n")
	case !s.e.Running():
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "engine not running\n")
	default:
		io.WriteString(w, "ok\n")
	}
}

// model is an entry of GET /v1/models.
type model struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Created     int64   `json:"created"`
	OwnedBy     string  `json:"owned_by"`
	Root        string  `json:"root"`
	Parent      *string `json:"parent"`
	MaxModelLen int     `json:"max_model_len,omitempty"`
	Cache       string  `json:"kvq_cache,omitempty"`
}

type modelList struct {
	Object string  `json:"object"`
	Data   []model `json:"data"`
}

func (s *Server) modelList() modelList {
	l := modelList{Object: "list"}
	l.Data = append(l.Data, model{ID: s.name, Object: "model", Created: s.created, OwnedBy: "kvq", Root: s.name, MaxModelLen: s.m.ContextLen, Cache: s.caches[0]})
	routed := s.routed()
	if routed {
		l.Data[0].Cache = "" // routed per request
	}
	parent := s.name
	for _, c := range s.caches {
		l.Data = append(l.Data, model{ID: s.name + "@" + c, Object: "model", Created: s.created, OwnedBy: "kvq", Root: s.name, Parent: &parent, MaxModelLen: s.m.ContextLen, Cache: c})
	}
	for _, id := range s.aliases() {
		a := model{ID: id, Object: "model", Created: s.created, OwnedBy: "kvq", Root: s.name, Parent: &parent, MaxModelLen: s.m.ContextLen, Cache: s.caches[0]}
		if routed {
			a.Cache = ""
		}
		l.Data = append(l.Data, a)
	}
	return l
}

func (s *Server) unknownModel(id string) *apiError {
	return &apiError{status: http.StatusNotFound, message: fmt.Sprintf("the model %q does not exist (this server has %s)", id, strings.Join(s.ModelIDs(), ", ")), typ: typeInvalid, param: "model", code: "model_not_found"}
}

// resolve maps a request's model id to a cache: NAME@CACHE to CACHE, NAME
// (or nothing) and the routes' model aliases to the routed cache.
func (s *Server) resolve(r *http.Request, id string) (string, *apiError) {
	if id == "" {
		id = s.name
	}
	if id == s.name || slices.Contains(s.aliases(), id) {
		return s.pick(r, id), nil
	}
	if name, cache, ok := strings.Cut(id, "@"); ok && name == s.name && slices.Contains(s.caches, cache) {
		return cache, nil
	}
	return "", s.unknownModel(id)
}

// api runs a generation endpoint: body limits, shutdown and error replies.
func (s *Server) api(w http.ResponseWriter, r *http.Request, h func(http.ResponseWriter, *http.Request, []byte) *apiError) {
	s.active.Add(1)
	defer s.active.Add(-1)
	if s.draining.Load() {
		s.fail(w, errShuttingDown)
		return
	}
	if r.ContentLength > s.opts.MaxBodyBytes {
		s.fail(w, s.tooLarge(r.ContentLength))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			s.fail(w, s.tooLarge(-1))
			return
		}
		s.fail(w, &apiError{status: http.StatusBadRequest, message: fmt.Sprintf("reading the request body: %v", err), typ: typeInvalid, code: "invalid_body"})
		return
	}
	if e := h(w, r, body); e != nil {
		s.fail(w, e)
	}
}

var errShuttingDown = &apiError{status: http.StatusServiceUnavailable, message: "the server is shutting down", typ: typeServer, code: "shutting_down"}

func (s *Server) tooLarge(n int64) *apiError {
	msg := fmt.Sprintf("request body over the server's limit of %d bytes", s.opts.MaxBodyBytes)
	if n >= 0 {
		msg = fmt.Sprintf("request body of %d bytes is over the server's limit of %d bytes", n, s.opts.MaxBodyBytes)
	}
	return &apiError{status: http.StatusRequestEntityTooLarge, message: msg, typ: typeInvalid, code: "request_too_large"}
}

// retryAfter is the Retry-After of a 429 (seconds): a queue of waiting
// requests drains in about that time on the models kvq serves.
const retryAfter = "1"

// fail writes an error response; a 429 carries Retry-After.
func (s *Server) fail(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", retryAfter)
	}
	s.writeJSON(w, e.status, errorBody(e))
}

func errorBody(e *apiError) any {
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	d := detail{Message: e.message, Type: e.typ}
	if e.param != "" {
		d.Param = &e.param
	}
	if e.code != "" {
		d.Code = &e.code
	}
	return struct {
		Error detail `json:"error"`
	}{d}
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		s.log.Error("serve: encoding a response", "err", err)
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"internal error encoding the response","type":"server_error","param":null,"code":"internal_error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// marshal encodes v without HTML escaping (OpenAI writes <, > and & as
// they are).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Serve accepts connections on ln until ctx ends, then shuts down
// gracefully: in-flight requests get Options.ShutdownGrace to finish,
// and are then cancelled (a stream ends with an error event, its engine
// request is aborted). While they finish, the server still accepts
// connections and answers /health and new requests with 503 (so that a
// load balancer's health check sees the drain); once none is in flight,
// or the grace is over, it stops accepting. Close during the grace ends
// it at once (a second Ctrl-C). It returns nil after such a shutdown, or
// the error that stopped the listener. Serve may be called once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.served.Swap(true) {
		return errors.New("serve: Serve called twice")
	}
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return s.base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.cancelBase()
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	grace, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownGrace)
	defer cancel()
	go func() {
		select {
		case <-s.force:
			cancel()
		case <-grace.Done():
		}
	}()
	// Still accepting, answering 503, until the requests in flight end.
	for s.active.Load() > 0 && grace.Err() == nil {
		select {
		case <-grace.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
	err := hs.Shutdown(grace)
	if err != nil {
		// The grace is over: cancel what is left, give the handlers a
		// moment to end their streams (none after Close), then close
		// their connections.
		s.cancelBase()
		for deadline := time.Now().Add(2 * time.Second); s.active.Load() > 0 && time.Now().Before(deadline) && !s.closed(); {
			time.Sleep(5 * time.Millisecond)
		}
		hs.Close()
	}
	s.cancelBase()
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close ends a Serve that is shutting down at once, as a second Ctrl-C
// does with uvicorn and vLLM: requests still in flight are cancelled and
// their connections closed without waiting for the grace. Before the
// shutdown it only marks the server, so that its shutdown is immediate.
func (s *Server) Close() { s.forceOnce.Do(func() { close(s.force) }) }

func (s *Server) closed() bool {
	select {
	case <-s.force:
		return true
	default:
		return false
	}
}

// finite makes a log-probability encodable: -Inf as vLLM writes it
// (-9999), NaN as null (the caller decides).
func finite(v float32) float32 {
	if math.IsInf(float64(v), -1) || v < -9999 {
		return -9999
	}
	return v
}
