module github.com/kvqlabs/kvq

go 1.26
