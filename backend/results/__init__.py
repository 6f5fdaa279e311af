"""Trial results in generic tables: samples, time series, summary values and artifacts."""
