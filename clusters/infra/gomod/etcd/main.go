// Command etcd is upstream's etcd server: the same entry point as go.etcd.io/etcd/v3's main.go,
// built from the server module because Debian's etcd (3.4) is older than current kube-apiservers accept.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
