// The New-sweep form: choosing another job type shows its parameters at once (without script, the
// form's button does it). A file, not an inline script: the Content-Security-Policy allows none.
document.getElementById("job-type-select")?.addEventListener("change", (ev) => ev.target.form.submit());
