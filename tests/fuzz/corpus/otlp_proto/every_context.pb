
 
4

service.name
vllm

r
1

	host.name
hç
)
s

scope.keep
1

scope.drop
2¹
0123456789abcdef01234567*AJ
gen_ai.request.id
req-1J
tp_rankJ
x
deleted by delete_keyJ!

user.email
alice@example.comJ
k*	

a
J
nested2

inner
vPZ&ev

batch_size
4
prompt
pj@
0123456789abcdef01234567"
	link.keep
y"
	link.drop
nzsecret error
&$"*BJ
e
only allowed in events