// Package repocheck holds tests over the repository's own source: checks
// that no file of the module may break without a compiler noticing, such as
// a test that reads a file at an absolute path of a development machine.
// It has no code of its own.
package repocheck
