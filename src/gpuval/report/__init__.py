"""The outputs of a judged run, views that never judge again: report.html, summary.json and
junit.xml (writers), results.json (results_json), measurements.csv (tables), gpuval.prom
(prometheus), the webhook (webhook)."""
