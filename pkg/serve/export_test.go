package serve

import "net/http"

// SetTestHook makes s call f first in every request (to make a handler
// panic).
func SetTestHook(s *Server, f func(*http.Request)) { s.testHook = f }
