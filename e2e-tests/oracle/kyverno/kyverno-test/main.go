// Command kyverno-test is Kyverno's own `kyverno test` command (v1.19.1, as go.mod pins it),
// unchanged: `kyverno-oracle totest` writes the oracle's answers as kyverno-test.yaml files,
// and this checks them with the CLI itself.
package main

import (
	"os"

	"github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/commands/test"
)

func main() {
	cmd := test.Command()
	cmd.SetArgs(os.Args[1:])
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}
