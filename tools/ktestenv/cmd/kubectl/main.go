// Command kubectl is upstream's kubectl, built from its published Go module.
package main

import (
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		// Print the error the way upstream kubectl does and exit non-zero.
		util.CheckErr(err)
	}
}
