"""Understanding a message: which intent it is, and the entities it names.

Rules first, then a trained local classifier, then (only when configured) a model whose
answer is constrained to the declared intents; entities come from declared patterns,
vocabularies, dates and amounts, and a value a model offers is kept only if it is grounded
in what the user wrote. Also the classifier's training data, cache and evaluation. The
result is an ``IntentResult``; nothing here decides what to do with it (that is routing).
"""
