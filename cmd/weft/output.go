package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Output formats of -o.
const (
	outTable = "table"
	outJSON  = "json"
)

// addOutput gives a command that prints data the one output flag,
// -o/--output table|json, writing the chosen format to *target before
// RunE. The spellings commands had before -o still work as deprecated
// aliases (issue #13): legacy "format" is --format table|json (text is
// table), legacy "json" is the boolean --json. Giving an alias and a
// different -o is an error.
func addOutput(c *cobra.Command, target *string, legacy string) {
	f := c.Flags()
	f.StringVarP(target, "output", "o", outTable, "output format: table|json")
	var format string
	var asJSON bool
	switch legacy {
	case "format":
		f.StringVar(&format, "format", "", "deprecated alias of -o (table|json; text = table)")
	case "json":
		f.BoolVar(&asJSON, "json", false, "deprecated alias of -o json")
	case "":
	default:
		panic("addOutput: unknown legacy flag " + legacy)
	}
	pre := c.PreRunE
	c.PreRunE = func(cmd *cobra.Command, args []string) error {
		if *target != outTable && *target != outJSON {
			return fmt.Errorf("-o %q: want table or json", *target)
		}
		alias := ""
		switch {
		case f.Changed("format"):
			switch format {
			case outTable, "text":
				alias = outTable
			case outJSON:
				alias = outJSON
			default:
				return fmt.Errorf("--format %q: want table or json (--format is deprecated: use -o)", format)
			}
		case f.Changed("json") && asJSON:
			alias = outJSON
		}
		if alias != "" {
			if f.Changed("output") && *target != alias {
				return fmt.Errorf("-o %s and the deprecated --%s say different things: give -o only", *target, legacy)
			}
			*target = alias
		}
		if pre != nil {
			return pre(cmd, args)
		}
		return nil
	}
}

// emit prints v: as JSON with -o json, else with write (the table).
func emit[T any](w io.Writer, format string, v T, write func(io.Writer, T)) error {
	if format == outJSON {
		return printJSON(w, v)
	}
	write(w, v)
	return nil
}
