// Package depgraph holds no code: its test pins kvq's package import graph
// (the dependency rules of docs/style.md, section A) by parsing the imports
// of every non-test Go file in the module. Add a rule to the table in
// depgraph_test.go when a package boundary needs one.
package depgraph
