"""Behaviour: the scripted expert and customers, the social engineer, the escalation and leaving rules, the LM
customer's prompt and view, and the readers of a transcript. The models that play them live in :mod:`sparring.lm`."""
