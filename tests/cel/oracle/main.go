package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type input struct {
	Expr   string             `json:"expr"`
	Driver string             `json:"driver"`
	Device resourceapi.Device `json:"device"`
}

// The API server's check of a new selector (validateCELExpression in pkg/apis/resource/validation):
// NewExpressions with 1.37's default gates (DRAConsumableCapacity on, DRAListTypeAttributes off).
// The scheduler compiles as StoredExpressions, the newest environment, which accepts more.
func main() {
	c := dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true})
	envType := environment.NewExpressions
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var in input
		if err := json.Unmarshal(sc.Bytes(), &in); err != nil {
			panic(err)
		}
		r := c.CompileCELExpression(in.Expr, dracel.Options{EnvType: &envType})
		out := map[string]any{"expr": in.Expr}
		if r.Error != nil {
			out["compile_error"] = r.Error.Error()
		} else {
			ok, _, err := r.DeviceMatches(context.Background(), dracel.Device{Driver: in.Driver, Attributes: in.Device.Attributes, Capacity: in.Device.Capacity})
			if err != nil {
				out["error"] = err.Error()
			} else {
				out["result"] = ok
			}
		}
		b, _ := json.Marshal(out)
		fmt.Println(string(b))
	}
}
