//go:build purego

package canary

// pureGo: the test binary runs the pure-Go kernel fallbacks.
const pureGo = true
