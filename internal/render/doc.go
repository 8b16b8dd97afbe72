// Package render prints kvq's command output: tables for people (through
// tablewriter), and JSON, CSV and Markdown for tools and documents, plus
// line charts as SVG or PNG.
//
// Commands hand it data, never formatting: a Report holds header-and-rows
// Tables, an optional flat table for CSV and a value for JSON. On a terminal
// tables get light box borders; otherwise they are printed as plain,
// stable, space-aligned columns (no colour, no wrapping, no truncation, no
// trailing spaces), so scripts and golden files can rely on them.
//
// Library packages never import render; only internal/cli does. Functions
// are safe for concurrent use on different writers.
package render
