module github.com/switchyard-dev/switchyard/loadtest

go 1.26.0
